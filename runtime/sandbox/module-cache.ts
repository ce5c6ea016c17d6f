// Instrumenting and compiling a module costs milliseconds; instances are rebuilt after every fault,
// so the compiled WebAssembly.Module is kept per (bytes, limits) and shared by every rebuild.
import { createHash } from "node:crypto";
import { instrument, type InstrumentOptions } from "./instrument.ts";

const cache = new Map<string, WebAssembly.Module>();

export function compileInstrumented(wasm: Uint8Array<ArrayBuffer>, opts: InstrumentOptions): WebAssembly.Module {
  const key = `${createHash("sha256").update(wasm).digest("hex")}:${opts.memoryPages}:${opts.tableElements ?? ""}`;
  let mod = cache.get(key);
  if (!mod) cache.set(key, (mod = new WebAssembly.Module(instrument(wasm, opts))));
  return mod;
}
