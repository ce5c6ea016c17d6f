// Everything a hookbox plugin needs: `import { ... } from "../lib"` (or "../../lib" for hostile/).
export * from "./mem";
export * from "./json";
export * from "./host";
export { hookboxAbort } from "./abort";

import { readInput } from "./mem";

/**
 * Starts an exported call: resets the heap and returns the input bytes. Plugins are built with the
 * stub runtime (no GC: fastest, and fuel use independent of heap history), so each call starts from
 * an empty heap. Consequence: keep nothing on the heap between calls (state lives in KV), and
 * allocate nothing in top-level statements.
 */
export function beginCall(): Uint8Array {
  __reset();
  return readInput();
}
