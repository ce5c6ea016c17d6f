// Moving bytes between the plugin's linear memory and Extism memory blocks. The kernel only offers
// 1- and 8-byte loads/stores (each a host call), so copy 8 bytes at a time: as-pdk's
// Memory.allocateBytes stores byte by byte, eight times the host calls.
import {
  alloc,
  free,
  length,
  load_u8,
  load_u64,
  store_u8,
  store_u64,
  input_length,
  input_load_u8,
  input_load_u64,
  output_set,
  error_set,
} from "./env";

/** Copies `len` bytes at `ptr` (linear memory) into a fresh Extism block; returns its offset. */
export function storeRaw(ptr: usize, len: i32): u64 {
  const off = alloc(<u64>len);
  writeBlock(off, ptr, len);
  return off;
}

/** Overwrites the Extism block at `off` (exactly `len` bytes long) with `len` bytes at `ptr`. */
export function writeBlock(off: u64, ptr: usize, len: i32): void {
  if (blockCopies && len > 0 && hookbox_block_write(off, <u64>ptr, <u64>len) == <u64>len) return;
  let i = 0;
  for (; i + 8 <= len; i += 8) store_u64(off + <u64>i, load<u64>(ptr + <usize>i));
  for (; i < len; i++) store_u8(off + <u64>i, load<u8>(ptr + <usize>i));
}

/** A UTF-8 copy of `s` in Extism memory (what host functions take as a string argument). */
export function storeString(s: string): u64 {
  const buf = String.UTF8.encode(s);
  return storeRaw(changetype<usize>(buf), buf.byteLength);
}

/** Reads a whole Extism block (then frees it: host return values are ours to release). */
export function loadBlock(off: u64): Uint8Array {
  const n = <i32>length(off);
  const out = new Uint8Array(n);
  const p = out.dataStart;
  if (!blockCopies || n <= 64 || hookbox_block_read(off, <u64>p, <u64>n) != <u64>n) {
    let i = 0;
    for (; i + 8 <= n; i += 8) store<u64>(p + <usize>i, load_u64(off + <u64>i));
    for (; i < n; i++) store<u8>(p + <usize>i, load_u8(off + <u64>i));
  }
  free(off);
  return out;
}

// Whole-block copies between linear memory and an Extism block in one host call, used only when the
// input came in one copy too: a host that declined that (one without the plugin's memory at hand)
// would decline these too, and each try is a host call.
let blockCopies = false;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_block_read")
declare function hookbox_block_read(block: u64, dest: u64, len: u64): u64;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_block_write")
declare function hookbox_block_write(block: u64, src: u64, len: u64): u64;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_input_read")
declare function hookbox_input_read(dest: u64, len: u64): u64;
// @ts-ignore: decorator
@external("extism:host/user", "hookbox_output_write")
declare function hookbox_output_write(src: u64, len: u64): u64;

/** The call's input bytes (the hook payload as UTF-8 JSON). */
export function readInput(): Uint8Array {
  const n = <i32>input_length();
  const out = new Uint8Array(n);
  const p = out.dataStart;
  // One host call copies it all; the kernel loop below (a host call per 8 bytes) is the fallback.
  // Made even for an empty input: the host takes it as the sign that the export called beginCall().
  const copied = hookbox_input_read(<u64>p, <u64>n);
  blockCopies = n > 0 && copied == <u64>n;
  if (copied == <u64>n) return out;
  let i = 0;
  for (; i + 8 <= n; i += 8) store<u64>(p + <usize>i, input_load_u64(<u64>i));
  for (; i < n; i++) store<u8>(p + <usize>i, input_load_u8(<u64>i));
  return out;
}

/** Sets the call's output to `len` bytes at `ptr`. */
export function outputRaw(ptr: usize, len: i32): void {
  // One host call copies it; through the kernel it is a block, a copy and output_set. When this
  // call's input read was declined (the host cannot reach this memory), the write would be declined
  // too: it is not asked.
  if (blockCopies && hookbox_output_write(<u64>ptr, <u64>len) == <u64>len) return;
  output_set(storeRaw(ptr, len), <u64>len);
}

/** Sets the call's output to `s` as UTF-8 (as-pdk's outputString gets the length wrong for non-ASCII). */
export function outputString(s: string): void {
  const buf = String.UTF8.encode(s);
  outputRaw(changetype<usize>(buf), buf.byteLength);
}

/**
 * Ends an export as a failure whose text is `message`: `return fail("why");`. A non-zero return
 * without a message fails too, but then the host can only say which code it was.
 */
export function fail(message: string, code: i32 = 1): i32 {
  error_set(storeString(message));
  return code;
}

export function outputBytes(b: Uint8Array): void {
  outputRaw(b.dataStart, b.length);
}
