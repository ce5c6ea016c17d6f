// Well-behaved test plugin: counts every event per hook in its plugin-wide KV ("count:<hook>") and
// returns nothing, so tests can check it saw every event while hostile plugins misbehaved.
import { beginCall, kvGet, kvList, kvSet, outputString, quote, GLOBAL } from "../../lib";

const PREFIX = "count:";

function count(hook: string): i32 {
  beginCall();
  const key = PREFIX + hook;
  const v = kvGet(GLOBAL, key);
  kvSet(GLOBAL, key, (v === null ? 1 : I64.parseInt(v) + 1).toString());
  return 0;
}

export function on_session_start(): i32 { return count("on_session_start"); }
export function on_session_end(): i32 { return count("on_session_end"); }
export function on_session_finalize(): i32 { return count("on_session_finalize"); }
export function on_session_reset(): i32 { return count("on_session_reset"); }
export function pre_llm_call(): i32 { return count("pre_llm_call"); }
export function post_llm_call(): i32 { return count("post_llm_call"); }
export function pre_tool_call(): i32 { return count("pre_tool_call"); }
export function post_tool_call(): i32 { return count("post_tool_call"); }
export function post_compaction(): i32 { return count("post_compaction"); }
export function on_session_delete(): i32 { return count("on_session_delete"); }

/** `/counts`: {"<hook>": n, ...} for every hook seen at least once. */
export function command_counts(): i32 {
  beginCall();
  const keys = kvList(GLOBAL, PREFIX);
  let out = "{";
  for (let i = 0; i < keys.length; i++) {
    const v = kvGet(GLOBAL, keys[i]);
    if (i > 0) out += ",";
    out += quote(keys[i].substring(PREFIX.length)) + ":" + (v === null ? "0" : v);
  }
  outputString(out + "}");
  return 0;
}
