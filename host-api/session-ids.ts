// The id list of hookbox_kv_delete_sessions (a JSON array of strings, e.g. the raw deleted_ids of
// on_session_delete), read from the plugin's memory and checked. Every plugin that cleans up after
// one bulk delete hands over the same list: the last one parsed is kept and, when the next call's
// bytes are the same, reused (10,000 ids: about 1 ms of decoding and parsing per plugin otherwise).
import type { CallContext } from "@extism/extism";
import { Buffer } from "node:buffer";
import { PluginCallError } from "../hooks/failures.ts";
import { KV_LIMITS } from "./kv.ts";
import { readBlock } from "./memory.ts";

/**
 * One call's ids: parsed and looked up synchronously on the host's thread (about 0.4 us an id), so a
 * call stays within tens of ms; 3 M ids held the thread for 1.2 s.
 */
export const MAX_SWEEP_IDS = 50_000;
/** The longest id: a key is at most KV_LIMITS.keyBytes bytes (so as many characters), no longer id is in one. */
export const MAX_SWEEP_ID_CHARS = KV_LIMITS.keyBytes;
/** The most bytes of ids one call may hand over, measured before they are decoded. */
export const MAX_SWEEP_IDS_BYTES = 4 * 1024 * 1024;

export interface SessionIds {
  /** The list as the plugin wrote it (handed to SQL as is). */
  readonly json: string;
  readonly list: readonly string[];
}

const CACHED_BYTES = 1024 * 1024;
let last: { bytes: Buffer; ids: SessionIds } | undefined;

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const refuse = (problem: string) => new PluginCallError("trap", `hookbox_kv_delete_sessions: ${problem}`);

export function readSessionIds(ctx: CallContext, offset: bigint): SessionIds {
  const view = readBlock(ctx, offset, "session ids");
  // The length first: 16 MB decoded before it was refused held the thread 134 ms (Node), 512 ms (Deno).
  if (view.byteLength > MAX_SWEEP_IDS_BYTES) throw refuse(`at most ${MAX_SWEEP_IDS_BYTES} bytes of ids per call (plugins-wasm/lib splits longer lists)`);
  const bytes = Buffer.from(view.buffer, view.byteOffset, view.byteLength);
  if (last !== undefined && last.bytes.equals(bytes)) return last.ids;
  // Strict, as every text a host function takes (memory.ts readText).
  let json: string;
  try {
    json = strictUtf8.decode(bytes);
  } catch {
    throw refuse("ids is not UTF-8 text");
  }
  let list: unknown;
  try {
    list = JSON.parse(json);
  } catch {
    throw refuse("ids is not JSON");
  }
  if (!Array.isArray(list) || !list.every((x) => typeof x === "string")) throw refuse("ids must be a JSON array of strings");
  if (list.length > MAX_SWEEP_IDS) throw refuse(`at most ${MAX_SWEEP_IDS} ids per call (plugins-wasm/lib splits longer lists)`);
  // An id longer than a key can match no key; SQL would still build and compare it per key (a few
  // 12 MB ids held the server's thread for seconds).
  if ((list as string[]).some((id) => id.length > MAX_SWEEP_ID_CHARS)) throw refuse(`an id may be at most ${MAX_SWEEP_ID_CHARS} characters (no longer one matches a key)`);
  // Each id once: the set-based delete walks an id's keys once per listing (2,000 copies of one id
  // over 6,000 keys held the server's thread 15 s; an outside probe). A delete's list is sorted:
  // told in one pass, no Set.
  const distinct = isStrictlySorted(list as string[]) ? (list as string[]) : [...new Set(list as string[])];
  if (distinct.length !== list.length) json = JSON.stringify(distinct);
  const ids: SessionIds = { json, list: Object.freeze(distinct) };
  // A copy (the block is the plugin's and may change after the call), of a list up to
  // CACHED_BYTES only: a bulk delete's ids (10,000: ~300 KB), not the largest lists a plugin may
  // send (4 MiB), kept for the life of the process.
  last = bytes.byteLength <= CACHED_BYTES ? { bytes: Buffer.from(bytes), ids } : undefined;
  return ids;
}

function isStrictlySorted(list: readonly string[]): boolean {
  for (let i = 1; i < list.length; i++) if (!(list[i - 1]! < list[i]!)) return false;
  return true;
}
