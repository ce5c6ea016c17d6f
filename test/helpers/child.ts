// Runs hookbox in a child process (`serve` or any CLI command) on a given config, the way an
// operator does: `node --import tsx runtime/cli.ts ...` under Node, `deno run -A --v8-flags=...
// runtime/cli.ts ...` (as `deno task hookbox`) under Deno. Crash tests SIGKILL it mid-operation and
// look at what the database kept.
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { EAGER_WASM_FLAG } from "../../runtime/sandbox/eager-compile.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const isDeno = "Deno" in globalThis;

export interface Child {
  proc: ChildProcess;
  /** stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code, or the signal name when killed. */
  exited: Promise<number | string>;
  kill(): Promise<number | string>;
}

/**
 * Writes `config` to `<dir>/hookbox.config.json` and starts `hookbox <args>` with it (`env` added to
 * the environment). `denoFlags: false` starts Deno without the V8 flag its tasks pass.
 */
export function spawnHookbox(dir: string, config: object, args: string[], env: Record<string, string> = {}, denoFlags = true): Child {
  const configPath = join(dir, "hookbox.config.json");
  writeFileSync(configPath, JSON.stringify(config));
  const flags = denoFlags ? [`--v8-flags=${EAGER_WASM_FLAG}`] : [];
  const argv = isDeno ? ["run", "-A", ...flags, "runtime/cli.ts", ...args] : ["--import", "tsx", "runtime/cli.ts", ...args];
  const proc = spawn(process.execPath, argv, {
    cwd: ROOT,
    env: { ...process.env, HOOKBOX_CONFIG: configPath, HOOKBOX_LOG: "error", DENO_NO_UPDATE_CHECK: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  proc.stderr!.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | string>((resolve) => proc.once("exit", (code, signal) => resolve(code ?? signal ?? "?")));
  return {
    proc,
    output: () => out,
    exited,
    kill() {
      proc.kill("SIGKILL");
      return exited;
    },
  };
}

/** Starts `hookbox serve --port 0` and resolves with its URL once it listens. */
export async function spawnServer(dir: string, config: object): Promise<Child & { url: string }> {
  const child = spawnHookbox(dir, config, ["serve", "--host", "127.0.0.1", "--port", "0"]);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /listening on (http:\/\/\S+)/.exec(child.output());
      if (m) {
        clearInterval(timer);
        resolve(m[1]!);
      }
    }, 20);
    void child.exited.then((code) => {
      clearInterval(timer);
      reject(new Error(`hookbox serve exited (${code}): ${child.output()}`));
    });
  });
  return Object.assign(child, { url });
}
