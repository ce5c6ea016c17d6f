// Instrumenting and compiling a module costs milliseconds; instances are rebuilt after every fault,
// so the compiled WebAssembly.Module is kept per (bytes, limits) and shared by every rebuild.
import { createHash } from "node:crypto";
import { instrument, InstrumentError, type InstrumentOptions } from "./instrument.ts";
import { rewindable } from "./rewind.ts";

const cache = new Map<string, Promise<WebAssembly.Module>>();

/**
 * Instrumented in slices and compiled off the event loop (WebAssembly.compile); a failure is not
 * kept. With `rewind` (import "module.name"s), the instrumented module is also made rewindable for
 * those imports (rewind.ts), off the thread too: the result is that module.
 */
export function compileInstrumented(wasm: Uint8Array<ArrayBuffer>, opts: InstrumentOptions, rewind?: readonly string[]): Promise<WebAssembly.Module> {
  const key = `${createHash("sha256").update(wasm).digest("hex")}:${opts.memoryPages}:${opts.tableElements ?? ""}:${opts.blockBytes ?? ""}:${rewind?.join(",") ?? ""}`;
  let mod = cache.get(key);
  if (!mod) {
    // The compile is also the module's validation (instrument() does not run V8's, on the thread).
    mod = instrument(wasm, opts)
      .then((bytes) => (rewind ? rewindable(bytes, rewind) : bytes))
      .then((bytes) =>
        WebAssembly.compile(bytes as Uint8Array<ArrayBuffer>).catch((err: Error) => {
          throw err instanceof WebAssembly.CompileError ? new InstrumentError(`not a valid WebAssembly module (${err.message})`) : err;
        }),
      );
    cache.set(key, mod);
    mod.catch(() => cache.delete(key));
  }
  return mod;
}
