// Hostile: never returns. Only the fuel budget (or the wall clock) can stop it.
import { beginCall } from "../../lib";

let spins: u64 = 0; // a global write per iteration so no optimizer can drop the loop

function spin(): i32 {
  beginCall();
  while (true) spins++;
  return 0;
}

export function pre_llm_call(): i32 {
  return spin();
}
export function post_compaction(): i32 {
  return spin();
}
export function on_session_delete(): i32 {
  return spin();
}
