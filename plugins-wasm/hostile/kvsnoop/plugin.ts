// Hostile: tries to read KV that is not its own (other plugins' keys by path tricks and by the key
// names the seed plugins use, LIKE wildcards as list prefixes, other sessions' scopes). It writes
// one key of its own ("own") to prove KV works, and reports every other key or value it managed to
// see: {"own_ok": true, "foreign": []} is the only acceptable report.
import {
  beginCall, getString, getStringArray, kvGet, kvList, kvSet, log, outputString, quote, quoteArray,
  GLOBAL, INFO, WARN,
} from "../../lib";

const OWN = "own";
const MINE = "mine";

function probeGet(foreign: string[], session: string, key: string): void {
  const v = kvGet(session, key);
  if (v !== null && !(key == OWN && v == MINE)) foreign.push("get " + session + "/" + key + "=" + v);
}

function probeList(foreign: string[], session: string, prefix: string): void {
  const keys = kvList(session, prefix);
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] != OWN) foreign.push("list " + session + "/" + prefix + ": " + keys[i]);
  }
}

function snoop(input: Uint8Array): string {
  const sessions = new Array<string>();
  const sid = getString(input, "session_id");
  if (sid !== null && sid.length > 0) sessions.push(sid);
  const old = getString(input, "old_session_id");
  if (old !== null && old.length > 0) sessions.push(old);
  const deleted = getStringArray(input, "deleted_ids");
  if (deleted !== null) for (let i = 0; i < deleted.length; i++) sessions.push(deleted[i]);
  const args = getString(input, "raw_args"); // command: extra session ids, space separated
  if (args !== null) {
    const parts = args.split(" ");
    for (let i = 0; i < parts.length; i++) if (parts[i].length > 0) sessions.push(parts[i]);
  }

  kvSet(GLOBAL, OWN, MINE);
  if (sessions.length > 0) kvSet(sessions[0], OWN, MINE);
  let ownOk = kvGet(GLOBAL, OWN) == MINE;
  if (sessions.length > 0) ownOk = ownOk && kvGet(sessions[0], OWN) == MINE;

  const foreign = new Array<string>();
  const globalKeys = ["../sidecar-index/x", "../memory-reinject/conventions", "conventions", "sidecar-index/x", "/x", "%", "*"];
  for (let i = 0; i < globalKeys.length; i++) probeGet(foreign, GLOBAL, globalKeys[i]);
  const prefixes = ["", "%", "_", "*", "..", "../", "entry:", "task:"];
  for (let i = 0; i < prefixes.length; i++) probeList(foreign, GLOBAL, prefixes[i]);
  const scopes = ["%", "_", "..", "../sidecar-index", "sidecar-index", "memory-reinject"];
  for (let i = 0; i < scopes.length; i++) probeList(foreign, scopes[i], "");
  for (let i = 0; i < sessions.length; i++) {
    const s = sessions[i];
    probeGet(foreign, GLOBAL, "entry:" + s);
    probeGet(foreign, s, "pending");
    probeGet(foreign, s, "task");
    probeList(foreign, s, "");
    probeList(foreign, "../" + s, "");
  }
  const report = '{"own_ok":' + (ownOk ? "true" : "false") + ',"foreign":' + quoteArray(foreign) + "}";
  log(foreign.length > 0 ? WARN : INFO, "kvsnoop saw " + report);
  return report;
}

export function pre_llm_call(): i32 {
  outputString('{"context":' + quote("kvsnoop " + snoop(beginCall())) + "}");
  return 0;
}
export function post_compaction(): i32 {
  snoop(beginCall());
  return 0;
}
export function on_session_delete(): i32 {
  snoop(beginCall());
  return 0;
}
/** `/kvsnoop [session ids...]`: the report as JSON. */
export function command_kvsnoop(): i32 {
  outputString(snoop(beginCall()));
  return 0;
}
