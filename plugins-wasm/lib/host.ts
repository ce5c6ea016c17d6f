// hookbox host functions (plugins-wasm/README.md "Host functions") with string-typed wrappers.
// Arguments are copied into Extism blocks and released after the call; returned blocks are read
// and released too, so a long-lived instance does not accumulate host-side memory.
import { free } from "./env";
import { loadBlock, storeString } from "./mem";
import { decodeStringArray } from "./json";

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

export function log(level: i32, msg: string): void {
  const m = storeString(msg);
  hookbox_log(level, m);
  free(m);
}

/** The value's UTF-8 bytes, or null when the key is absent. */
export function kvGetBytes(session: string, key: string): Uint8Array | null {
  const s = storeString(session);
  const k = storeString(key);
  const off = hookbox_kv_get(s, k);
  free(s);
  free(k);
  return off == 0 ? null : loadBlock(off);
}

export function kvGet(session: string, key: string): string | null {
  const b = kvGetBytes(session, key);
  return b === null ? null : String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
}

export function kvSet(session: string, key: string, value: string): void {
  const s = storeString(session);
  const k = storeString(key);
  const v = storeString(value);
  hookbox_kv_set(s, k, v);
  free(s);
  free(k);
  free(v);
}

export function kvDelete(session: string, key: string): void {
  const s = storeString(session);
  const k = storeString(key);
  hookbox_kv_delete(s, k);
  free(s);
  free(k);
}

/** Keys in `session` starting with `prefix` (the host returns a JSON array). */
export function kvList(session: string, prefix: string): string[] {
  const s = storeString(session);
  const p = storeString(prefix);
  const off = hookbox_kv_list(s, p);
  free(s);
  free(p);
  if (off == 0) return [];
  const keys = decodeStringArray(loadBlock(off), 0);
  return keys === null ? [] : keys;
}

/** Raw JSON array of {role, content} for a session (grant sessions:read). */
export function sessionMessages(session: string, limit: i64): string {
  const s = storeString(session);
  const off = hookbox_session_messages(s, limit);
  free(s);
  if (off == 0) return "[]";
  const b = loadBlock(off);
  return String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
}

/** `requestJson` is {method,url,headers?,body?}; returns the raw {status, body} JSON (grant http:<host>). */
export function http(requestJson: string): string {
  const r = storeString(requestJson);
  const off = hookbox_http(r);
  free(r);
  if (off == 0) return "";
  const b = loadBlock(off);
  return String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
}
