// Runs bench/client/load.mjs in its own process with the runtime running the bench (node or deno)
// and returns what it measured.
import { spawn } from "node:child_process";
import process from "node:process";

export interface LoadRequest {
  url: string;
  body: unknown;
}

export interface LoadResult {
  n: number;
  wall_ms: number;
  mean_ms: number;
  p50_ms: number;
  p99_ms: number;
  failed: number;
  first_error: string | null;
}

const script = new URL("../client/load.mjs", import.meta.url).pathname;

function command(): [string, string[]] {
  const deno = (globalThis as { Deno?: { execPath(): string } }).Deno;
  return deno ? [deno.execPath(), ["run", "-A", script]] : [process.execPath, [script]];
}

/** Sends `requests`; the first `warmup` of them untimed. */
export function runLoad(requests: readonly LoadRequest[], concurrency: number, warmup = 0): Promise<LoadResult> {
  const [cmd, args] = command();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => (out += String(d)));
    child.on("error", reject);
    child.on("close", (code) => {
      const line = out.trim().split("\n").at(-1) ?? "";
      try {
        if (code !== 0) throw new Error(`exit ${code}`);
        const res = JSON.parse(line) as LoadResult;
        if (res.failed > 0) throw new Error(`${res.failed} of ${res.n} requests failed, first: ${res.first_error}`);
        resolve(res);
      } catch (err) {
        reject(new Error(`load client: ${(err as Error).message} (${line.slice(0, 300)})`));
      }
    });
    child.stdin.end(JSON.stringify({ concurrency, warmup, requests }));
  });
}
