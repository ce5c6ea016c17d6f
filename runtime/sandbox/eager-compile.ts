// V8 compiles a WebAssembly function lazily, at its first call, on the thread that calls it, and
// that compile spends no fuel: a 4 MiB function of nested blocks held the server's thread 4-10 s on
// its first call, past every limit (an outside probe). With lazy compilation off,
// WebAssembly.compile compiles every function, off the thread (the loader awaits it), and no call
// compiles. Node's V8 takes the flag at run time: it is set before the first plugin is compiled.
// Deno's takes it only from its command line (--v8-flags) or DENO_V8_FLAGS: the deno tasks and npm
// scripts pass it, and a Deno server started without it says so in its log (plugins/manager.ts).
import { readFileSync } from "node:fs";
import process from "node:process";
import v8 from "node:v8";

export const EAGER_WASM_FLAG = "--no-wasm-lazy-compilation";

const isDeno = "Deno" in globalThis;
let decided: boolean | undefined;

/** Turns lazy compilation off where the runtime lets it be; whether WASM now compiles eagerly. */
export function compileEagerly(): boolean {
  if (decided === undefined) {
    if (!isDeno) v8.setFlagsFromString(EAGER_WASM_FLAG);
    decided = !isDeno || startedWithFlag();
  }
  return decided;
}

/** Deno: the flag in DENO_V8_FLAGS or in this process's own --v8-flags (Linux: /proc/self/cmdline). */
function startedWithFlag(): boolean {
  const listed = (flags: string | undefined) => (flags ?? "").split(/[\s,]+/).includes(EAGER_WASM_FLAG);
  if (listed(process.env.DENO_V8_FLAGS)) return true;
  try {
    return readFileSync("/proc/self/cmdline", "utf8").split("\0").some((arg) => arg.startsWith("--v8-flags=") && listed(arg.slice("--v8-flags=".length)));
  } catch {
    return false;
  }
}
