// Hostile: outputs a 10 MiB JSON string ("aaa..."), valid JSON so only the size limit can object.
// Written straight into an Extism block, 8 bytes per store, so it is the size that hurts, not time.
import { beginCall } from "../../lib";
import { alloc, output_set, store_u64, store_u8 } from "../../lib/env";

const SIZE: u64 = 10 << 20;
const AAAA: u64 = 0x6161616161616161;

function flood(): i32 {
  beginCall();
  const off = alloc(SIZE);
  for (let i: u64 = 0; i < SIZE; i += 8) store_u64(off + i, AAAA);
  store_u8(off, 0x22);
  store_u8(off + SIZE - 1, 0x22);
  output_set(off, SIZE);
  return 0;
}

export function pre_llm_call(): i32 {
  return flood();
}
export function post_compaction(): i32 {
  return flood();
}
export function on_session_delete(): i32 {
  return flood();
}
