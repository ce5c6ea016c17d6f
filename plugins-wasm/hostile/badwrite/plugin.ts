// Hostile: writes a KV mark, then outputs text that is not JSON. The refused output fails the call,
// so the mark must not be kept (a failed call leaves nothing behind).
import { beginCall, getString, kvSet, outputString } from "../../lib";

export function pre_llm_call(): i32 {
  const input = beginCall();
  const sid = getString(input, "session_id");
  if (sid !== null) kvSet(sid, "mark", "left by a call whose output was refused");
  outputString('{"context": "unterminated');
  return 0;
}
