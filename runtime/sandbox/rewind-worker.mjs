// The transform behind rewind.ts, in a worker thread of its own: Binaryen's asyncify pass over an
// instrumented module, so that the calls it makes to the listed (async) imports can unwind the
// module's stack and rewind it later. Plain JavaScript: under tsx, importing binaryen's 15 MB
// bundle took ~30 s (tsx transforms it); a worker without tsx's loader imports it in ~1 s, once for
// all the modules a load hands it (one at a time, in order).
import { parentPort, workerData } from "node:worker_threads";

// Binaryen reports a module it cannot handle on stdout/stderr before it throws: the error goes back
// in the answer instead, and the server's output stays its own.
console.log = console.error = console.warn = () => {};

const { contextModule, contextName, contextExport } = workerData;
const loading = import("binaryen");

parentPort.on("message", async ({ id, bytes, imports }) => {
  try {
    const { default: binaryen } = await loading;
    const out = transform(binaryen, bytes, imports);
    parentPort.postMessage({ id, bytes: out }, [out.buffer]);
  } catch (err) {
    // Binaryen's aborts throw objects without a message.
    const why = typeof err?.message === "string" ? err.message : typeof err === "string" ? err : "Binaryen gave up on the module (an internal abort)";
    parentPort.postMessage({ id, error: why.slice(0, 500) });
  }
});

function transform(binaryen, bytes, imports) {
  const module = binaryen.readBinary(bytes);
  try {
    // What V8 of Node 20 compiles; a module using anything else fails validation below.
    const f = binaryen.Features;
    module.setFeatures(f.MutableGlobals | f.SignExt | f.BulkMemory | f.BulkMemoryOpt | f.NontrappingFPToInt | f.SIMD128 | f.MultiValue | f.ReferenceTypes);
    binaryen.setPassArgument("asyncify-imports", imports.join(","));
    // Level 1: asyncify cleans up the code it adds; the module's own code is not optimized further.
    binaryen.setOptimizeLevel(1);
    binaryen.setShrinkLevel(0);
    module.runPasses(["asyncify"]);
    // An export that calls one import of the host's: the sandbox calls it once per instance, through
    // the SDK, to learn the instance's call context (direct-call.ts), before the first real call.
    module.addFunctionImport("hookbox_rewind_context", contextModule, contextName, binaryen.none, binaryen.none);
    module.addFunction("hookbox_rewind_context_export", binaryen.none, binaryen.none, [], module.call("hookbox_rewind_context", [], binaryen.none));
    module.addFunctionExport("hookbox_rewind_context_export", contextExport);
    if (!module.validate()) throw new Error("the transformed module does not validate");
    return module.emitBinary();
  } finally {
    module.dispose();
  }
}
