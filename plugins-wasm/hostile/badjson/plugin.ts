// Hostile: outputs text that is not JSON (an unterminated object on pre_llm_call).
import { beginCall, outputString } from "../../lib";

export function pre_llm_call(): i32 {
  beginCall();
  outputString('{"context": "unterminated');
  return 0;
}
export function post_compaction(): i32 {
  beginCall();
  outputString("not json at all {");
  return 0;
}
export function on_session_delete(): i32 {
  beginCall();
  outputString("}{");
  return 0;
}
