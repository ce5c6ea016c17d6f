// Well-behaved test plugin: keeps every payload it is given, byte for byte, in its plugin-wide KV
// ("ev:<n>", n zero-padded so keys list in arrival order) and returns nothing. Tests read them back
// with /hookrec to check what a real WASM plugin receives.
import { beginCall, kvGet, kvList, kvSet, outputString, GLOBAL } from "../../lib";

function record(): i32 {
  const buf = beginCall();
  const n = kvGet(GLOBAL, "n");
  const next = n === null ? 1 : I32.parseInt(n) + 1;
  kvSet(GLOBAL, "n", next.toString());
  kvSet(GLOBAL, "ev:" + next.toString().padStart(6, "0"), String.UTF8.decodeUnsafe(buf.dataStart, <usize>buf.length));
  return 0;
}

export function on_session_start(): i32 { return record(); }
export function on_session_end(): i32 { return record(); }
export function on_session_finalize(): i32 { return record(); }
export function on_session_reset(): i32 { return record(); }
export function pre_llm_call(): i32 { return record(); }
export function post_llm_call(): i32 { return record(); }
export function pre_tool_call(): i32 { return record(); }
export function post_tool_call(): i32 { return record(); }
export function post_compaction(): i32 { return record(); }
export function on_session_delete(): i32 { return record(); }

/** `/hookrec`: every recorded payload, in arrival order, as one JSON array. */
export function command_hookrec(): i32 {
  beginCall();
  const keys = kvList(GLOBAL, "ev:");
  let out = "[";
  for (let i = 0; i < keys.length; i++) {
    const v = kvGet(GLOBAL, keys[i]);
    if (v === null) continue;
    if (out.length > 1) out += ",";
    out += v!;
  }
  outputString(out + "]");
  return 0;
}
