// Everything a hookbox plugin needs: `import { ... } from "../lib"` (or "../../lib" for hostile/).
export * from "./mem";
export * from "./json";
export * from "./host";
export * from "./bytes";
export * from "./payloads";
export { hookboxAbort } from "./abort";

import { readInput } from "./mem";
import { AL_MASK, BLOCK_OVERHEAD } from "rt/common";

// Where the stub allocator's heap starts, and where it stood when the first call began: everything
// below the mark was allocated by top-level code (e.g. a string built by concatenation) and must
// survive; everything above it belongs to one call.
const HEAP_START: usize = ((__heap_base + BLOCK_OVERHEAD + AL_MASK) & ~AL_MASK) - BLOCK_OVERHEAD;
let heapMark: usize = 0;

/**
 * Starts an exported call: drops the previous call's heap and returns the input bytes. Plugins are
 * built with the stub runtime (a bump allocator, no GC: fastest, and fuel use independent of heap
 * history), so each call starts from the same heap. Consequence: keep no heap object that a call
 * created in a global for a later call (state lives in KV).
 */
export function beginCall(): Uint8Array {
  if (heapMark == 0) heapMark = __alloc(0) - BLOCK_OVERHEAD; // the bump pointer before this probe
  __reset();
  // One block spanning [HEAP_START, heapMark) puts the bump pointer back at the mark.
  if (heapMark > HEAP_START) __alloc(heapMark - HEAP_START - BLOCK_OVERHEAD);
  return readInput();
}
