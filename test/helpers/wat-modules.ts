// Tiny hand-written modules for sandbox tests: each export exercises one limit without needing the
// AssemblyScript build. Source: test/fixtures/limits.wat (rebuilt by test/fixtures/build-wat.mjs).
import { readFileSync } from "node:fs";

let bytes: Uint8Array<ArrayBuffer> | undefined;

export function limitsModule(): Uint8Array<ArrayBuffer> {
  return (bytes ??= new Uint8Array(readFileSync(new URL("../fixtures/limits.wasm", import.meta.url))));
}

/** One module of test/fixtures/hostile/ (an attack class of issue 9), built by build-wat.mjs. */
export function hostileModule(name: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(readFileSync(new URL(`../fixtures/hostile/${name}.wasm`, import.meta.url)));
}
