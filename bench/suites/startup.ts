// Start-up and memory with 100 plugins, each measured in a fresh process (what an operator's restart
// is): a core with no plugins vs one with 100 plugin copies (memory-reinject, sidecar-index,
// task-tracker in turn), first start (nothing cached) and restart (the instrumented modules come
// from the on-disk cache). RSS per loaded plugin = (RSS with 100 - RSS with none) / 100.
import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";
import { median } from "../lib/measure.ts";
import { EAGER_WASM_FLAG } from "../../runtime/sandbox/eager-compile.ts";

const COUNT = 100;
const KINDS = ["memory-reinject", "sidecar-index", "task-tracker"];
const root = new URL("../../", import.meta.url).pathname;
const child = new URL("../client/startup.ts", import.meta.url).pathname;

interface Start {
  ms: number;
  rss: number;
  active: number;
}

function runChild(configFile: string): Promise<Start> {
  const deno = (globalThis as { Deno?: { execPath(): string } }).Deno;
  const [cmd, args] = deno ? [deno.execPath(), ["run", "-A", `--v8-flags=${EAGER_WASM_FLAG}`, child, configFile]] : [process.execPath, ["--import", "tsx", "--disable-warning=ExperimentalWarning", child, configFile]];
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"], cwd: root });
    let out = "";
    p.stdout.on("data", (d) => (out += String(d)));
    p.on("error", reject);
    p.on("close", (code) => {
      try {
        if (code !== 0) throw new Error(`exit ${code}`);
        resolve(JSON.parse(out.trim().split("\n").at(-1)!) as Start);
      } catch (err) {
        reject(new Error(`startup child: ${(err as Error).message}: ${out.slice(0, 300)}`));
      }
    });
  });
}


export async function runStartup(opts: BenchOptions): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), "hookbox-bench-start-"));
  try {
    const names: string[] = [];
    for (let i = 0; i < COUNT; i++) {
      const from = KINDS[i % KINDS.length]!;
      const name = `p${String(i).padStart(3, "0")}`;
      const src = join(root, "plugins-wasm", from);
      mkdirSync(join(dir, "plugins", name), { recursive: true });
      copyFileSync(join(src, "plugin.wasm"), join(dir, "plugins", name, "plugin.wasm"));
      const manifest = JSON.parse(readFileSync(join(src, "manifest.json"), "utf8")) as object;
      writeFileSync(join(dir, "plugins", name, "manifest.json"), JSON.stringify({ ...manifest, name, commands: [] }));
      names.push(name);
    }
    const config = (enabled: string[]) => {
      const file = join(dir, `config-${enabled.length}.json`);
      const cfg = { db_url: `file:${join(dir, "hookbox.db")}`, sessions_dir: join(dir, "sessions"), plugins: { dir: join(dir, "plugins"), enabled } };
      writeFileSync(file, JSON.stringify(cfg));
      return file;
    };
    const none = config([]);
    const all = config(names);
    const rounds = opts.quick ? 1 : 3;
    progress(`start-up: no plugins (${rounds} starts)`);
    const bare: Start[] = [];
    for (let r = 0; r < rounds; r++) bare.push(await runChild(none));
    progress(`start-up: ${COUNT} plugins, first start (empty module cache)`);
    const first = await runChild(all);
    progress(`start-up: ${COUNT} plugins, restarts (${rounds})`);
    const again: Start[] = [];
    for (let r = 0; r < rounds; r++) again.push(await runChild(all));
    for (const s of [first, ...again]) if (s.active !== COUNT) throw new Error(`start-up: ${s.active} of ${COUNT} plugins active`);
    const bareMs = median(bare.map((s) => s.ms));
    const bareRss = median(bare.map((s) => s.rss));
    const restartMs = median(again.map((s) => s.ms));
    const restartRss = median(again.map((s) => s.rss));
    const group = `start-up (fresh process, createCore)`;
    const mib = (b: number) => (b / 1024 / 1024).toFixed(1);
    return [
      { group, case: "no plugins", plugins: 0, mean_ms: bareMs, samples: bare.length, note: `RSS ${mib(bareRss)} MiB` },
      { group, case: `${COUNT} plugins, first start`, plugins: COUNT, mean_ms: first.ms, samples: 1, note: `RSS ${mib(first.rss)} MiB` },
      {
        group,
        case: `${COUNT} plugins, restart`,
        plugins: COUNT,
        mean_ms: restartMs,
        samples: again.length,
        note: `RSS ${mib(restartRss)} MiB; ${((restartRss - bareRss) / COUNT / 1024).toFixed(0)} KiB per loaded plugin`,
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
