// Hostile: allocates (and touches) 1 MiB blocks until the allocator cannot grow memory and traps.
import { beginCall } from "../../lib";

let touched: u64 = 0;

function bomb(): i32 {
  beginCall();
  while (true) {
    const block = new Uint8Array(1 << 20);
    block[block.length - 1] = 1; // commit the page, not just reserve it
    touched += block[block.length - 1];
  }
  return 0;
}

export function pre_llm_call(): i32 {
  return bomb();
}
export function post_compaction(): i32 {
  return bomb();
}
export function on_session_delete(): i32 {
  return bomb();
}
