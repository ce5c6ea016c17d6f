// task-tracker: "/task <title>" opens a task tied to the calling session; archiving that session
// closes it (on_session_delete, reason "archive"); any other delete reason removes the session's
// tasks, since their session is gone. "/task" alone lists every task.
// KV (plugin-wide): "next_id"; "task:<session_id>:<id>" = {"id","title","session_id","status"}.
import {
  beginCall, bytesOf, getNumber, getRaw, getString, getStringArray, kvDelete, kvGet, kvList, kvSet,
  outputString, quote, GLOBAL,
} from "../lib";

const PREFIX = "task:";
const NEXT_ID = "next_id";

function taskJson(id: string, title: string, sid: string, status: string): string {
  return '{"id":' + id + ',"title":' + quote(title) + ',"session_id":' + quote(sid) + ',"status":' + quote(status) + "}";
}

function open(sid: string, title: string): string {
  const next = kvGet(GLOBAL, NEXT_ID);
  const id = (next === null ? 1 : I64.parseInt(next)).toString();
  kvSet(GLOBAL, NEXT_ID, (I64.parseInt(id) + 1).toString());
  const task = taskJson(id, title, sid, "open");
  kvSet(GLOBAL, PREFIX + sid + ":" + id, task);
  return '{"opened":' + task + "}";
}

function list(): string {
  const keys = kvList(GLOBAL, PREFIX);
  let out = '{"tasks":[';
  let n = 0;
  for (let i = 0; i < keys.length; i++) {
    const v = kvGet(GLOBAL, keys[i]);
    if (v === null) continue;
    if (n++ > 0) out += ",";
    out += v;
  }
  return out + "]}";
}

/** `/task <title>` opens a task for the calling session; `/task` lists. */
export function command_task(): i32 {
  const input = beginCall();
  const args = getString(input, "raw_args");
  const title = args === null ? "" : args.trim();
  if (title.length == 0) {
    outputString(list());
    return 0;
  }
  const sid = getString(input, "session_id");
  if (sid === null || sid.length == 0) {
    outputString('{"error":"/task needs a session"}');
    return 0;
  }
  outputString(open(sid, title));
  return 0;
}

/** Deletes the task at `key` (session gone) or marks it closed (session archived). */
function closeTask(key: string, sid: string, archive: bool): void {
  if (!archive) {
    kvDelete(GLOBAL, key);
    return;
  }
  const v = kvGet(GLOBAL, key);
  if (v === null) return;
  const b = bytesOf(v);
  const id = getRaw(b, "id");
  const title = getString(b, "title");
  kvSet(GLOBAL, key, taskJson(id === null ? "0" : id, title === null ? "" : title, sid, "closed"));
}

/** Above this many ids, one kvList of every task beats a kvList per session (bulk deletes). */
const BULK = 16;

export function on_session_delete(): i32 {
  const input = beginCall();
  const ids = getStringArray(input, "deleted_ids");
  if (ids === null) return 0;
  const archive = getString(input, "reason") == "archive";
  if (ids.length <= BULK) {
    for (let i = 0; i < ids.length; i++) {
      const keys = kvList(GLOBAL, PREFIX + ids[i] + ":");
      for (let k = 0; k < keys.length; k++) closeTask(keys[k], ids[i], archive);
    }
    return 0;
  }
  // A 10k-session bulk delete cost 10k host calls (and ran out of fuel): list the tasks once.
  const keys = kvList(GLOBAL, PREFIX);
  if (keys.length == 0) return 0; // no tasks: nothing to look up
  const gone = new Set<string>();
  for (let i = 0; i < ids.length; i++) gone.add(ids[i]);
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k];
    const sid = key.substring(PREFIX.length, key.lastIndexOf(":")); // "task:<session_id>:<id>"
    if (gone.has(sid)) closeTask(key, sid, archive);
  }
  return 0;
}
