// task-tracker: "/task <title>" opens a task tied to the calling session; archiving that session
// closes it (on_session_delete, reason "archive"); any other delete reason removes the session's
// tasks, since their session is gone. "/task" alone lists the tasks (the first LIST_MAX).
// KV (plugin-wide): "next_id" (the last id handed out, counted with the atomic kvIncr so that several
// hookbox processes on one database never hand out the same id); "task:<session_id>:<id>" =
// {"id","title","session_id","status"}.
import {
  beginCall, countStrings, findField, getString, getStringArray, kvIncr, kvListBytes,
  kvSet, outputString, quote, skipValue, ByteWriter, KvKeys, SliceSet, StringCursor, GLOBAL, kvDeleteSessions, KEY_STARTS_PREFIX_ID, UNCOUNTED,
} from "../lib";

const PREFIX = "task:";
const NEXT_ID = "next_id";
/**
 * Longest title (UTF-8 bytes) and most tasks one listing shows: any caller can open tasks, and a
 * listing of every task at any length ran the plugin out of memory for everyone (an outside probe).
 */
const TITLE_MAX = 1000;
const LIST_MAX = 500;

function taskJson(id: string, title: string, sid: string, status: string): string {
  return '{"id":' + id + ',"title":' + quote(title) + ',"session_id":' + quote(sid) + ',"status":' + quote(status) + "}";
}

function open(sid: string, title: string): string {
  const id = kvIncr(GLOBAL, NEXT_ID, 1).toString();
  const task = taskJson(id, title, sid, "open");
  kvSet(GLOBAL, PREFIX + sid + ":" + id, task);
  return '{"opened":' + task + "}";
}

/**
 * {"tasks":[...]}: the first LIST_MAX tasks' stored JSON (in key order), copied byte for byte into
 * one buffer; "more": true when there are others.
 */
function list(): void {
  const keys = kvListBytes(GLOBAL, PREFIX);
  const out = new ByteWriter(min(keys.length * 3, 64 * 1024) + 16);
  out.text('{"tasks":[');
  const k = new StringCursor(keys, 0);
  const kv = new KvKeys(GLOBAL);
  let n = 0;
  let more = false;
  while (k.next()) {
    if (n == LIST_MAX) {
      more = true;
      break;
    }
    const v = kv.get(keys, k.start, k.end);
    if (v === null) continue;
    if (n++ > 0) out.text(",");
    out.slice(v, 0, v.length);
  }
  kv.close();
  out.text(more ? '],"more":true}' : "]}").output();
}

/** `/task <title>` opens a task for the calling session; `/task` lists. */
export function command_task(): i32 {
  const input = beginCall();
  const args = getString(input, "raw_args");
  const title = args === null ? "" : args.trim();
  if (title.length == 0) {
    list();
    return 0;
  }
  const sid = getString(input, "session_id");
  if (sid === null || sid.length == 0) {
    outputString('{"error":"/task needs a session"}');
    return 0;
  }
  if (String.UTF8.byteLength(title) > TITLE_MAX) {
    outputString('{"error":"a task title is at most ' + TITLE_MAX.toString() + ' bytes"}');
    return 0;
  }
  outputString(open(sid, title));
  return 0;
}

/**
 * The task at keys[start, end) (raw JSON key content): deleted when its session is gone, rewritten
 * as closed when the session was archived. `scratch` is reused for the value.
 */
function closeTask(kv: KvKeys, keys: Uint8Array, start: i32, end: i32, archive: bool, scratch: ByteWriter): void {
  if (!archive) {
    kv.delete(keys, start, end);
    return;
  }
  const v = kv.get(keys, start, end);
  if (v === null) return;
  // {"id","title","session_id","status"} with status "closed": the other fields are copied raw.
  const id = findField(v, "id");
  const title = findField(v, "title");
  const sid = findField(v, "session_id");
  if (id < 0 || title < 0 || sid < 0) return;
  scratch.reset();
  scratch
    .text('{"id":').slice(v, id, skipValue(v, id))
    .text(',"title":').slice(v, title, skipValue(v, title))
    .text(',"session_id":').slice(v, sid, skipValue(v, sid))
    .text(',"status":"closed"}');
  kv.set(keys, start, end, scratch);
}

/** Above this many archived ids, one kvList of every task beats a kvList per session. */
const BULK = 16;

export function on_session_delete(): i32 {
  const input = beginCall();
  const at = findField(input, "deleted_ids");
  const archive = getString(input, "reason") == "archive";
  if (!archive) {
    // The sessions are gone: their tasks go, in one host call with the raw id list.
    const end = at < 0 ? -1 : skipValue(input, at);
    if (end > at) kvDeleteSessions(GLOBAL, PREFIX, input, at, end, KEY_STARTS_PREFIX_ID | UNCOUNTED);
    return 0;
  }
  // Archived: each of their tasks is rewritten as closed.
  const scratch = new ByteWriter();
  const kv = new KvKeys(GLOBAL);
  if (countStrings(input, at) <= BULK) {
    const ids = getStringArray(input, "deleted_ids");
    if (ids === null) return 0;
    for (let i = 0; i < ids.length; i++) {
      const keys = kvListBytes(GLOBAL, PREFIX + ids[i] + ":");
      const k = new StringCursor(keys, 0);
      while (k.next()) closeTask(kv, keys, k.start, k.end, archive, scratch);
    }
    kv.close();
    return 0;
  }
  // A bulk archive: list the tasks once and match "task:<session_id>:<n>" against the archived ids
  // as raw byte slices (no string per id or key: 10,000 of them ran 64 pages out of memory).
  const keys = kvListBytes(GLOBAL, PREFIX);
  if (keys.length <= 2) return 0; // "[]": no tasks, nothing to look up
  const gone = SliceSet.ofArray(input, at);
  const k = new StringCursor(keys, 0);
  while (k.next()) {
    let colon = k.end - 1; // the last ':' ends the session id
    while (colon > k.start && load<u8>(keys.dataStart + <usize>colon) != 0x3a) colon--;
    const s = k.start + PREFIX.length;
    if (colon > s && gone.has(keys, s, colon)) closeTask(kv, keys, k.start, k.end, archive, scratch);
  }
  kv.close();
  return 0;
}
