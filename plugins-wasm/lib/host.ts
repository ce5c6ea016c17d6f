// hookbox host functions (plugins-wasm/README.md "Host functions") with string-typed wrappers.
// Arguments are copied into Extism blocks and released after the call; returned blocks are read
// and released too, so a long-lived instance does not accumulate host-side memory.
import { free } from "./env";
import { loadBlock, storeRaw, storeString, writeBlock } from "./mem";
import { decodeString, decodeStringArray, skipValue, skipWs } from "./json";
import { ByteWriter } from "./bytes";

// @ts-ignore: decorator
@external("extism:host/user", "hookbox_log")
declare function hookbox_log(level: i32, msg: u64): void;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_kv_get")
declare function hookbox_kv_get(session: u64, key: u64): u64;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_kv_set")
declare function hookbox_kv_set(session: u64, key: u64, value: u64): void;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_kv_delete")
declare function hookbox_kv_delete(session: u64, key: u64): void;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_kv_list")
declare function hookbox_kv_list(session: u64, prefix: u64): u64;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_kv_delete_sessions")
declare function hookbox_kv_delete_sessions(session: u64, prefix: u64, ids: u64, mode: u64): u64;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_kv_incr")
declare function hookbox_kv_incr(session: u64, key: u64, delta: i64): i64;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_kv_cas")
declare function hookbox_kv_cas(session: u64, key: u64, expected: u64, next: u64): i64;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_session_messages")
declare function hookbox_session_messages(session: u64, limit: i64): u64;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_http")
declare function hookbox_http(request: u64): u64;

export const DEBUG = 0;
export const INFO = 1;
export const WARN = 2;
export const ERROR = 3;

/** Plugin-wide KV scope (no session). */
export const GLOBAL = "";

/** A scope argument: the host takes offset 0 for GLOBAL, so the commonest scope needs no block. */
function storeScope(session: string): u64 {
  return session.length == 0 ? 0 : storeString(session);
}

function releaseScope(s: u64): void {
  if (s != 0) free(s);
}

export function log(level: i32, msg: string): void {
  const m = storeString(msg);
  hookbox_log(level, m);
  free(m);
}

/** The value's UTF-8 bytes, or null when the key is absent. */
export function kvGetBytes(session: string, key: string): Uint8Array | null {
  const s = storeScope(session);
  const k = storeString(key);
  const off = hookbox_kv_get(s, k);
  releaseScope(s);
  free(k);
  return off == 0 ? null : loadBlock(off);
}

export function kvGet(session: string, key: string): string | null {
  const b = kvGetBytes(session, key);
  return b === null ? null : String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
}

export function kvSet(session: string, key: string, value: string): void {
  const s = storeScope(session);
  const k = storeString(key);
  const v = storeString(value);
  hookbox_kv_set(s, k, v);
  releaseScope(s);
  free(k);
  free(v);
}

/**
 * Adds `delta` to the integer at `key` (absent counts as 0) and returns the new value. Atomic across
 * every process on the database: no two callers ever get the same value.
 */
export function kvIncr(session: string, key: string, delta: i64): i64 {
  const s = storeScope(session);
  const k = storeString(key);
  const n = hookbox_kv_incr(s, k, delta);
  releaseScope(s);
  free(k);
  return n;
}

/**
 * Sets `key` to `next` only if it holds `expected` (null: absent; a null `next` deletes). False when
 * it held something else: nothing was written; read it again and decide.
 */
export function kvCas(session: string, key: string, expected: string | null, next: string | null): bool {
  const s = storeScope(session);
  const k = storeString(key);
  const e = expected === null ? 0 : storeString(expected);
  const v = next === null ? 0 : storeString(next);
  const ok = hookbox_kv_cas(s, k, e, v);
  releaseScope(s);
  free(k);
  if (e != 0) free(e);
  if (v != 0) free(v);
  return ok == 1;
}

export function kvDelete(session: string, key: string): void {
  const s = storeScope(session);
  const k = storeString(key);
  hookbox_kv_delete(s, k);
  releaseScope(s);
  free(k);
}

/** Keys in `session` starting with `prefix` (the host returns a JSON array). */
export function kvList(session: string, prefix: string): string[] {
  const s = storeScope(session);
  const p = storeString(prefix);
  const off = hookbox_kv_list(s, p);
  releaseScope(s);
  free(p);
  if (off == 0) return [];
  const keys = decodeStringArray(loadBlock(off), 0);
  return keys === null ? [] : keys;
}

/**
 * The keys in `session` starting with `prefix` as the host's raw JSON array (walk it with
 * StringCursor: no string per key; kvList decodes them all, which large namespaces cannot afford).
 */
export function kvListBytes(session: string, prefix: string): Uint8Array {
  const s = storeScope(session);
  const p = storeString(prefix);
  const off = hookbox_kv_list(s, p);
  releaseScope(s);
  free(p);
  return off == 0 ? new Uint8Array(0) : loadBlock(off);
}

/** How kvDeleteSessions matches keys to session ids. */
export const KEY_IS_PREFIX_ID: u64 = 0; // prefix + id
// prefix + id + ":" + suffix, the suffix without ":" (the id ends at the key's last ":", so ids may
// hold ":"; a key "t:<id>:a:b" belongs to the id "<id>:a", not to "<id>")
export const KEY_STARTS_PREFIX_ID: u64 = 1;
/**
 * Or'ed into kvDeleteSessions' mode: the keys go uncounted (it returns -1). Counting reads every
 * matching key once more before the delete does: a clean-up that ignores the number skips it.
 */
export const UNCOUNTED: u64 = 2;

/**
 * Deletes the keys of many sessions in ONE host call: `buf[start, end)` is a JSON array of session
 * ids, passed as is (e.g. the raw `deleted_ids` of on_session_delete: nothing is decoded here); a
 * list longer than one call may carry (50,000 ids, 4 MiB) goes in parts, one call each.
 * Returns how many keys were deleted, or -1 with UNCOUNTED in `mode`.
 */
export function kvDeleteSessions(session: string, prefix: string, buf: Uint8Array, start: i32, end: i32, mode: u64): i64 {
  const s = storeScope(session);
  const p = storeString(prefix);
  let n: i64 = 0;
  // A list that may pass the host's bounds per call (SWEEP_IDS ids, SWEEP_BYTES) goes in parts;
  // a shorter one (an id takes 3 bytes at least: quotes and comma) as it is.
  if (end - start > SWEEP_BYTES || end - start >= SWEEP_IDS * 3) n = sweepInParts(s, p, buf, start, end, mode);
  else {
    const ids = storeRaw(buf.dataStart + <usize>start, end - start);
    n = <i64>hookbox_kv_delete_sessions(s, p, ids, mode);
    free(ids);
  }
  releaseScope(s);
  free(p);
  return n;
}

/** The host's bounds of one hookbox_kv_delete_sessions call (host-api/session-ids.ts MAX_SWEEP_IDS). */
const SWEEP_IDS: i32 = 50_000;
const SWEEP_BYTES: i32 = 2 * 1024 * 1024;

/** Splits the array at `start` at commas into parts within the host's bounds, one call each. */
function sweepInParts(s: u64, p: u64, buf: Uint8Array, start: i32, end: i32, mode: u64): i64 {
  let open = skipWs(buf, start); // the '[' of the part being gathered (later: the comma before it)
  let i = open + 1;
  let count = 0;
  let n: i64 = 0;
  for (;;) {
    i = skipWs(buf, i);
    if (i >= end || buf[i] == 0x5d) break; // ']'
    const after = skipValue(buf, i);
    if (after < 0) break;
    count++;
    i = skipWs(buf, after);
    if (i >= end || buf[i] != 0x2c) break; // no ',': the array ends here
    if (count == SWEEP_IDS || i - open >= SWEEP_BYTES) {
      n = addCount(n, sweepPart(s, p, buf, open, i, mode));
      open = i;
      count = 0;
    }
    i++;
  }
  return addCount(n, sweepPart(s, p, buf, open, end - 1, mode));
}

/** Two parts' counts added; -1 (uncounted) stays -1. */
function addCount(a: i64, b: i64): i64 {
  return a < 0 || b < 0 ? -1 : a + b;
}

/**
 * One call for the ids between `open` and `close` (exclusive), sent as a JSON array: the bytes at
 * `open` and `close` (the array's brackets or the commas around a part) are set to '[' and ']' for
 * the copy and put back after it, so no part is copied twice.
 */
function sweepPart(s: u64, p: u64, buf: Uint8Array, open: i32, close: i32, mode: u64): i64 {
  const before = buf[open];
  const after = buf[close];
  buf[open] = 0x5b;
  buf[close] = 0x5d;
  const ids = storeRaw(buf.dataStart + <usize>open, close - open + 1);
  buf[open] = before;
  buf[close] = after;
  const n = hookbox_kv_delete_sessions(s, p, ids, mode);
  free(ids);
  return <i64>n;
}

/**
 * KV calls for many keys of one scope within one plugin call (bulk deletes). Each host call needs
 * its arguments in Extism blocks, and Extism's kernel re-sums every block of the call on each
 * allocation: 10,000 deletes with fresh blocks cost 20,000 allocations and O(n^2) host time. Here
 * the scope is stored once and an argument block is reused for every key (or value) of the same
 * length, so a run of equally long keys costs one allocation. Keys are raw JSON string slices
 * (e.g. from kvListBytes); one with escapes is decoded first. close() releases the blocks.
 */
export class KvKeys {
  private scope: u64;
  private keyBlocks: Map<i32, u64> = new Map<i32, u64>();
  private valueBlocks: Map<i32, u64> = new Map<i32, u64>();

  constructor(session: string) {
    this.scope = storeScope(session);
  }

  delete(buf: Uint8Array, start: i32, end: i32): void {
    hookbox_kv_delete(this.scope, this.key(buf, start, end));
  }

  get(buf: Uint8Array, start: i32, end: i32): Uint8Array | null {
    const off = hookbox_kv_get(this.scope, this.key(buf, start, end));
    return off == 0 ? null : loadBlock(off);
  }

  set(buf: Uint8Array, start: i32, end: i32, value: ByteWriter): void {
    hookbox_kv_set(this.scope, this.key(buf, start, end), reuse(this.valueBlocks, value.buf.dataStart, value.length));
  }

  close(): void {
    releaseScope(this.scope);
    const keys = this.keyBlocks.values();
    for (let i = 0; i < keys.length; i++) free(keys[i]);
    const values = this.valueBlocks.values();
    for (let i = 0; i < values.length; i++) free(values[i]);
  }

  private key(buf: Uint8Array, start: i32, end: i32): u64 {
    for (let j = start; j < end; j++) {
      if (load<u8>(buf.dataStart + <usize>j) == 0x5c) {
        const k = decodeString(buf, start - 1);
        const bytes = String.UTF8.encode(k === null ? "" : k);
        return reuse(this.keyBlocks, changetype<usize>(bytes), bytes.byteLength);
      }
    }
    return reuse(this.keyBlocks, buf.dataStart + <usize>start, end - start);
  }
}

/** The block of exactly `len` bytes from `blocks` (allocated on first use), now holding ptr[0, len). */
function reuse(blocks: Map<i32, u64>, ptr: usize, len: i32): u64 {
  let off: u64;
  if (blocks.has(len)) {
    off = blocks.get(len);
    writeBlock(off, ptr, len);
  } else {
    off = storeRaw(ptr, len);
    blocks.set(len, off);
  }
  return off;
}

/** Raw JSON array of {role, content} for a session (grant sessions:read). */
export function sessionMessages(session: string, limit: i64): string {
  const s = storeString(session); // a session id, not a KV scope: offset 0 is no id
  const off = hookbox_session_messages(s, limit);
  free(s);
  if (off == 0) return "[]";
  const b = loadBlock(off);
  return String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
}

/**
 * `requestJson` is {method,url,headers?,body?}; returns the raw {status, body} JSON (grant
 * http:<host>), or {status: 0, body: "", error} when no answer came (refused, unknown host, reset).
 */
export function http(requestJson: string): string {
  const r = storeString(requestJson);
  const off = hookbox_http(r);
  free(r);
  if (off == 0) return "";
  const b = loadBlock(off);
  return String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
}
