// Well-behaved test plugin that keeps its own books balanced: each session gets an "external
// resource" id in its session-scoped KV at start; on_session_delete reads that id for every deleted
// session (the host keeps the rows readable during the call) and releases it. /books reports
// {"opened", "released", "missing"}: missing counts deleted sessions whose id it could not read.
// /fill N writes N plugin-wide keys (to run into the KV quota).
import { beginCall, getString, getStringArray, kvGet, kvIncr, kvSet, outputString, GLOBAL } from "../../lib";

export function on_session_start(): i32 {
  const input = beginCall();
  const sid = getString(input, "session_id");
  if (sid === null) return 0;
  kvSet(sid, "resource", "res-" + sid);
  kvIncr(GLOBAL, "opened", 1);
  return 0;
}

export function on_session_delete(): i32 {
  const input = beginCall();
  const reason = getString(input, "reason");
  if (reason !== null && reason == "archive") return 0;
  const ids = getStringArray(input, "deleted_ids");
  if (ids === null) return 0;
  let released: i64 = 0;
  let missing: i64 = 0;
  for (let i = 0; i < ids.length; i++) {
    const res = kvGet(ids[i], "resource");
    if (res !== null && res == "res-" + ids[i]) released++;
    else missing++;
  }
  if (released > 0) kvIncr(GLOBAL, "released", released);
  if (missing > 0) kvIncr(GLOBAL, "missing", missing);
  return 0;
}

function counter(key: string): string {
  const v = kvGet(GLOBAL, key);
  return v === null ? "0" : v;
}

export function command_books(): i32 {
  beginCall();
  outputString('{"opened":' + counter("opened") + ',"released":' + counter("released") + ',"missing":' + counter("missing") + "}");
  return 0;
}

export function command_fill(): i32 {
  const input = beginCall();
  const arg = getString(input, "raw_args");
  const n = arg === null || arg.trim().length == 0 ? 0 : I32.parseInt(arg.trim());
  for (let i = 0; i < n; i++) kvSet(GLOBAL, "fill:" + i.toString(), "x");
  outputString('{"filled":' + n.toString() + "}");
  return 0;
}
