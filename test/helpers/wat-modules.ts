// Tiny hand-written modules for sandbox tests: each export exercises one limit without needing the
// AssemblyScript build. Source: test/fixtures/limits.wat (rebuilt by test/fixtures/build-wat.mjs).
import { readFileSync } from "node:fs";

let bytes: Uint8Array<ArrayBuffer> | undefined;

export function limitsModule(): Uint8Array<ArrayBuffer> {
  return (bytes ??= new Uint8Array(readFileSync(new URL("../fixtures/limits.wasm", import.meta.url))));
}
