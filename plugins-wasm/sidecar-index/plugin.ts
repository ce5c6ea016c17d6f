// sidecar-index: one plugin-wide KV entry per live session, "entry:<session_id>" =
// {"session_id","platform","profile","llm_calls","compactions","compacted_from"}. A rotating
// compaction moves the entry to the new id; on_session_delete drops the entry of every id in
// deleted_ids (cascaded children and chain rows included), so no entry outlives its session; an
// archive (reason "archive") keeps them: the sessions still exist.
// Entries are updated with kv_cas against the text read: when another process (a second server on
// the same database) updated one meanwhile, the call is run again, so no count is lost.
import {
  beginCall, countStrings, findField, getNumber, getString, kvCas, kvDelete, kvDeleteSessions, kvGetBytes, kvListBytes,
  quote, skipValue, ByteWriter, StringCursor, GLOBAL, KEY_IS_PREFIX_ID, UNCOUNTED,
} from "../lib";

const PREFIX = "entry:";

class Entry {
  platform: string = "";
  profile: string = "";
  llmCalls: i64 = 0;
  compactions: i64 = 0;
  compactedFrom: string = "";
  /** The stored text this entry was read from (null: none stored): what save() expects to replace. */
  stored: string | null = null;
}

function load(sid: string): Entry | null {
  const b = kvGetBytes(GLOBAL, PREFIX + sid);
  if (b === null) return null;
  const e = new Entry();
  e.stored = String.UTF8.decode(b.buffer);
  const platform = getString(b, "platform");
  if (platform !== null) e.platform = platform;
  const profile = getString(b, "profile");
  if (profile !== null) e.profile = profile;
  e.llmCalls = <i64>getNumber(b, "llm_calls", 0);
  e.compactions = <i64>getNumber(b, "compactions", 0);
  const from = getString(b, "compacted_from");
  if (from !== null) e.compactedFrom = from;
  return e;
}

/**
 * Writes the entry if the key still holds what it was read from (guarded: a change another process
 * commits before this call does fails the call as conflict, and the runtime runs it again). False
 * when it already holds something else (changed since this call read it): read it again.
 */
function save(sid: string, e: Entry): bool {
  const text =
    '{"session_id":' + quote(sid) + ',"platform":' + quote(e.platform) + ',"profile":' + quote(e.profile) +
    ',"llm_calls":' + e.llmCalls.toString() + ',"compactions":' + e.compactions.toString() +
    ',"compacted_from":' + quote(e.compactedFrom) + "}";
  return kvCas(GLOBAL, PREFIX + sid, e.stored, text);
}

/** Read-modify-write tries before a call gives up (each retry reads what the other writer stored). */
const TRIES = 5;

function changing(sid: string): Error {
  return new Error("sidecar-index: entry " + sid + " kept changing during the call");
}

function loadOrNew(sid: string): Entry {
  const e = load(sid);
  return e === null ? new Entry() : e;
}

export function on_session_start(): i32 {
  const input = beginCall();
  const sid = getString(input, "session_id");
  if (sid === null) return 0;
  const platform = getString(input, "platform");
  const profile = getString(input, "profile");
  for (let i = 0; i < TRIES; i++) {
    const e = loadOrNew(sid);
    if (platform !== null) e.platform = platform;
    if (profile !== null) e.profile = profile;
    if (save(sid, e)) return 0;
  }
  throw changing(sid);
}

export function post_llm_call(): i32 {
  const input = beginCall();
  const sid = getString(input, "session_id");
  if (sid === null) return 0;
  for (let i = 0; i < TRIES; i++) {
    const e = loadOrNew(sid);
    e.llmCalls++;
    if (save(sid, e)) return 0;
  }
  throw changing(sid);
}

export function post_compaction(): i32 {
  const input = beginCall();
  const sid = getString(input, "session_id");
  if (sid === null) return 0;
  const old = getString(input, "old_session_id");
  const rotated = old !== null && old.length > 0 && old != sid;
  for (let i = 0; i < TRIES; i++) {
    let e = loadOrNew(sid);
    if (rotated) {
      // Rotation: the conversation continues under the new id; the old row is history.
      const moved = load(old!);
      if (moved !== null) {
        moved.stored = e.stored; // it replaces what the new id holds
        e = moved;
      }
      e.compactedFrom = old!;
    }
    e.compactions++;
    if (save(sid, e)) {
      if (rotated) kvDelete(GLOBAL, PREFIX + old!);
      return 0;
    }
  }
  throw changing(sid);
}

export function on_session_delete(): i32 {
  const input = beginCall();
  // An archived session still exists (and may be unarchived, which fires nothing): its entry stays.
  const reason = getString(input, "reason");
  if (reason !== null && reason == "archive") return 0;
  const at = findField(input, "deleted_ids");
  if (at < 0) return 0;
  const end = skipValue(input, at);
  if (end < 0) return 0;
  // One host call for all of them, the id list passed as the raw JSON it arrived in: a 10,000-id
  // bulk delete decodes nothing and allocates nothing here.
  kvDeleteSessions(GLOBAL, PREFIX, input, at, end, KEY_IS_PREFIX_ID | UNCOUNTED);
  return 0;
}

/** `/index`: {"count": n, "sessions": [ids...]}, written straight from the key list's bytes. */
export function command_index(): i32 {
  beginCall();
  const keys = kvListBytes(GLOBAL, PREFIX);
  const out = new ByteWriter(keys.length + 64);
  out.text('{"count":').int(countStrings(keys, 0)).text(',"sessions":[');
  const k = new StringCursor(keys, 0);
  let n = 0;
  while (k.next()) {
    if (n++ > 0) out.text(",");
    // The key's raw JSON content minus "entry:" is the id's raw JSON content.
    out.text('"').slice(keys, k.start + PREFIX.length, k.end).text('"');
  }
  out.text("]}").output();
  return 0;
}
