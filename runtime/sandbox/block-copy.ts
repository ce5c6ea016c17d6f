// hookbox_block_read / hookbox_block_write: a whole Extism block copied to or from the plugin's
// linear memory in one host call. The kernel offers only 1- and 8-byte loads and stores, each a host
// call: 30,000 of them for a 10,000-id list. No host memory is made here: the block exists already
// (the plugin allocated it through the metered alloc shim, or a host function returned it).
import type { CallContext } from "@extism/extism";
import { blockBytes } from "../../host-api/memory.ts";

/** An Extism address is a block index (high 16 bits) and an offset in it (low 48): the offset. */
export const offsetInBlock = (address: bigint): number => Number(BigInt.asUintN(48, address));

/**
 * The block at `block` (from its start, exactly `len` long) and linear memory at `at` as two views
 * of `len` bytes, or undefined: no memory in this thread (its instance is in a worker), a bad
 * range. Then the functions return 0 and the plugin falls back to the kernel's loads and stores.
 */
function views(memory: WebAssembly.Memory | undefined, ctx: CallContext, block: bigint, at: bigint, len: bigint): [Uint8Array, Uint8Array] | undefined {
  if (!memory || offsetInBlock(block) !== 0 || ctx.length(block) !== len) return undefined;
  // In-thread a block reads as a view of its own ArrayBuffer.
  const target = blockBytes(ctx, block);
  if (target === null || !(target.buffer instanceof ArrayBuffer) || BigInt(target.byteLength) !== len) return undefined;
  const linear = linearRange(memory, at, len);
  return linear && [target, linear];
}

/** `len` bytes of linear memory at `at`, or undefined: no memory in this thread, or not all inside it. */
function linearRange(memory: WebAssembly.Memory | undefined, at: bigint, len: bigint): Uint8Array | undefined {
  if (!memory) return undefined;
  const a = Number(at);
  const n = Number(len);
  return a < 0 || n < 0 || a + n > memory.buffer.byteLength ? undefined : new Uint8Array(memory.buffer, a, n);
}

/** Bytes copied between two calls of `between`: one 16 MiB copy into fresh memory held the thread ~100 ms. */
export const COPY_CHUNK_BYTES = 1 << 20;

/** `from` into `to`, a chunk at a time with `between()` (a clock check, which may throw) in between. */
function copy(to: Uint8Array, from: Uint8Array, between: (() => void) | undefined): void {
  if (!between || from.byteLength <= COPY_CHUNK_BYTES) return void to.set(from);
  for (let at = 0; at < from.byteLength; at += COPY_CHUNK_BYTES) {
    if (at > 0) between();
    to.set(from.subarray(at, at + COPY_CHUNK_BYTES), at);
  }
}

/**
 * The two host functions over the instance's memory (undefined while there is none in this
 * thread); a large copy calls `between` after each COPY_CHUNK_BYTES.
 */
export function blockCopyFunctions(memory: () => WebAssembly.Memory | undefined, between?: () => void) {
  return {
    hookbox_block_read(ctx: CallContext, block: bigint, dest: bigint, len: bigint): bigint {
      const v = views(memory(), ctx, block, dest, len);
      if (!v) return 0n;
      copy(v[1], v[0], between);
      return len;
    },
    hookbox_block_write(ctx: CallContext, block: bigint, src: bigint, len: bigint): bigint {
      const v = views(memory(), ctx, block, src, len);
      if (!v) return 0n;
      copy(v[0], v[1], between);
      return len;
    },
  };
}
