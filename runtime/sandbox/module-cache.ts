// Instrumenting and compiling a module costs milliseconds; instances are rebuilt after every fault,
// so the compiled WebAssembly.Module is kept per (bytes, limits) and shared by every rebuild.
import { createHash } from "node:crypto";
import { compileEagerly } from "./eager-compile.ts";
import { instrument, InstrumentError, type InstrumentOptions } from "./instrument.ts";
import { rewindable } from "./rewind.ts";

const cache = new Map<string, Promise<WebAssembly.Module>>();
/**
 * Modules that could not be made rewindable, by key, with why: a reload does not run the transform
 * again (it may take its whole 20 s and hundreds of MB each time for the same answer).
 */
const refusedRewinds = new Map<string, Error>();

/**
 * Instrumented in slices and compiled off the event loop (WebAssembly.compile); a failure is not
 * kept. With `rewind` (import "module.name"s), the instrumented module is also made rewindable for
 * those imports (rewind.ts), off the thread too: the result is that module.
 */
export function compileInstrumented(wasm: Uint8Array<ArrayBuffer>, opts: InstrumentOptions, rewind?: readonly string[]): Promise<WebAssembly.Module> {
  compileEagerly(); // before the first compile: every function compiled here, off the thread, none at its first call
  const key = `${createHash("sha256").update(wasm).digest("hex")}:${opts.memoryPages}:${opts.tableElements ?? ""}:${opts.blockBytes ?? ""}:${rewind?.join(",") ?? ""}`;
  const refused = refusedRewinds.get(key);
  if (refused) return Promise.reject(refused);
  let mod = cache.get(key);
  if (!mod) {
    // instrument() runs no validation of V8's (on the thread); the module as given is validated by
    // compiling it off the thread, next to the compile of its instrumented form, once instrument()
    // found its shape within limits. Validating only the instrumented form was not enough: an index
    // past the module's own globals or functions names what instrument() appended (its fuel
    // counter: a loop that reset it ran for ever), and is valid there.
    mod = instrument(wasm, opts).then(async (bytes) => {
      const valid = compiled(wasm);
      const module = rewind
        ? rewindable(bytes, rewind).then(compiled, (err: Error) => {
            refusedRewinds.set(key, err);
            throw err;
          })
        : compiled(bytes);
      module.catch(() => undefined); // an invalid module fails as such, whatever this one says
      await valid;
      return module;
    });
    cache.set(key, mod);
    mod.catch(() => cache.delete(key));
  }
  return mod;
}

/** `bytes` compiled off the thread; an invalid module is refused as such. */
function compiled(bytes: Uint8Array): Promise<WebAssembly.Module> {
  return WebAssembly.compile(bytes as Uint8Array<ArrayBuffer>).catch((err: Error) => {
    throw err instanceof WebAssembly.CompileError ? new InstrumentError(`not a valid WebAssembly module (${err.message})`) : err;
  });
}
