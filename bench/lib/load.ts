// Runs bench/client/load.mjs in its own process and returns what it measured. The client runs under
// Deno whichever runtime serves (the running Deno, or the one npm installs in node_modules): the
// same client for both servers, and the fastest one here (against a bare Hono POST on Node: ~7,000
// req/s, Node running the same client ~4,200), so the floors measure the server, not the client.
// Without a Deno binary, Node runs it (the bench says so).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
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

/** The Deno binary to run the client with, or undefined when there is none. */
function denoBinary(): string | undefined {
  const deno = (globalThis as { Deno?: { execPath(): string } }).Deno;
  if (deno) return deno.execPath();
  try {
    const bin = join(dirname(createRequire(import.meta.url).resolve("deno/package.json")), process.platform === "win32" ? "deno.exe" : "deno");
    return existsSync(bin) ? bin : undefined;
  } catch {
    return undefined;
  }
}

const deno = denoBinary();
/** Which runtime runs the load client, for the table's notes. */
export const clientRuntime = deno ? "deno" : "node";

function command(): [string, string[]] {
  return deno ? [deno, ["run", "-A", script]] : [process.execPath, [script]];
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
