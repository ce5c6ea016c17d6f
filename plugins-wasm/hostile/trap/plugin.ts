// Hostile: traps. post_compaction goes through abort (a thrown error: the message reaches the host
// via error_set before the trap); the other hooks hit `unreachable` directly.
import { beginCall } from "../../lib";

export function pre_llm_call(): i32 {
  beginCall();
  unreachable();
  return 0;
}
export function post_compaction(): i32 {
  beginCall();
  throw new Error("trap plugin: deliberate abort");
}
export function on_session_delete(): i32 {
  beginCall();
  unreachable();
  return 0;
}
