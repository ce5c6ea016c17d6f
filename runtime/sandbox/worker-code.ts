// Where a worker thread's code comes from: the sandbox's workers (worker-thread.ts) and the tool
// argument check thread (tools/check-thread.ts). Deno runs a TypeScript module as it is. Node runs TypeScript
// through tsx, whose loader a worker does not inherit: registering it in each worker took ~150 ms
// and a loader thread per worker (a worker started in ~280 ms). So on Node an entry's modules are
// bundled into one JavaScript module once per process, by esbuild (the compiler tsx itself runs;
// ~250 ms, in its own process, off this thread), and each worker starts from it in ~50 ms.
import { Buffer } from "node:buffer";
import process from "node:process";
import { fileURLToPath } from "node:url";

const IS_DENO = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

/**
 * A worker keeps the process's own warning settings and nothing else of its command line: with
 * `--disable-warning=ExperimentalWarning` (npm start) its output stays JSON. (Deno has no such flag.)
 */
export const WORKER_EXEC_ARGV = process.execArgv.filter((a) => a.startsWith("--disable-warning="));

const bundles = new Map<string, Promise<URL>>();

/** The module a worker for `entry` (a .ts file) starts from. */
export function workerModule(entry: URL): Promise<URL> {
  if (IS_DENO) return Promise.resolve(entry);
  let bundled = bundles.get(entry.href);
  if (!bundled) {
    bundled = import("esbuild")
      .then(({ build }) => build({ entryPoints: [fileURLToPath(entry)], bundle: true, format: "esm", platform: "node", target: "node20", write: false, logLevel: "silent" }))
      .then((out) => new URL(`data:text/javascript;base64,${Buffer.from(out.outputFiles[0]!.contents).toString("base64")}`));
    bundles.set(entry.href, bundled);
    bundled.catch(() => bundles.delete(entry.href)); // a failed bundle is tried again by the next worker
  }
  return bundled;
}
