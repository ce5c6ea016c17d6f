// HTTP turns against outside floors, in one run: POST /v1/sessions/:id/turns (Hono, the turn service,
// the local provider, libSQL) with no plugins, 10 TS injectors and 10 WASM injectors (copies of the
// inject fixture, pre_llm_call), next to a bare Hono JSON POST and a Hono POST that commits one
// libSQL write transaction with the same durability setting (the floor a turn that stores anything
// cannot beat). The client runs in its own process (bench/client/load.mjs, under Deno when there is
// one: bench/lib/load.ts); every variant runs in several interleaved rounds (the machine is shared:
// drift hits all variants alike) and the table shows the median round. Each client works on its own sessions (turns of one session serialize),
// a fresh session every few turns keeps the history a realistic size.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { callbackSubscriber } from "../../hooks/dispatcher.ts";
import type { Core } from "../../runtime/core.ts";
import { serveFetch, startServer, type RunningServer } from "../../runtime/server.ts";
import { openStorage, writerPragmasFor, type Storage } from "../../runtime/storage/db.ts";
import { IdleCheckpoint } from "../../runtime/storage/idle-checkpoint.ts";
import { FileBatchWriter } from "../../runtime/storage/file-batch.ts";
import { assertNoPluginFailures, openBenchCore, type BenchCore } from "../lib/core.ts";
import { clientRuntime, runLoad, type LoadRequest, type LoadResult } from "../lib/load.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";
import { median } from "../lib/measure.ts";

const INJECTORS = 10;
const TURNS_PER_SESSION = 16;
const NOTE = "Reminder: answer briefly and cite the file you changed.";
const LOCAL = { host: "127.0.0.1", port: 0 };

interface Target {
  label: string;
  /** The requests of one round (untimed set-up, e.g. fresh sessions, happens here). */
  requests(n: number, clients: number): Promise<LoadRequest[]>;
  check?(): void;
  close(): Promise<void>;
}

function subscribeTsInjectors(core: Core): void {
  for (let i = 0; i < INJECTORS; i++) {
    core.dispatcher.subscribe(
      callbackSubscriber(`ts-inject-${String(i).padStart(2, "0")}`, ["pre_llm_call"], (p) => ({
        context: `${NOTE} (session ${p.session_id})`,
      })),
    );
  }
}

async function hookboxTarget(variant: "none" | "ts" | "wasm"): Promise<Target> {
  const bc: BenchCore =
    variant === "wasm" ? await openBenchCore({ fleet: [{ from: "hostile/inject", prefix: "inject", count: INJECTORS }] }) : await openBenchCore();
  if (variant === "ts") subscribeTsInjectors(bc.core);
  const server = await startServer(bc.core, LOCAL);
  let serial = 0;
  const requests = async (n: number, clients: number) => {
    const sessions: string[] = [];
    for (let i = 0; i < Math.ceil(n / TURNS_PER_SESSION) + clients; i++) sessions.push((await bc.core.sessions.create({ profile: "bench", platform: "bench" })).id);
    // Consecutive requests land on different sessions: concurrent clients rarely share one.
    return Array.from({ length: n }, (_, i) => ({
      url: `${server.url}/v1/sessions/${sessions[(i % clients) + clients * Math.floor(i / (clients * TURNS_PER_SESSION))]}/turns`,
      body: { message: `question ${serial++}: what is 6*7?` },
    }));
  };
  // The injections really happen (once, untimed): a turn answered without them would measure less.
  const probe = await fetch((await requests(1, 1))[0]!.url, { method: "POST", headers: { "content-type": "application/json" }, body: '{"message":"probe"}' });
  const injected = ((await probe.json()) as { injected?: unknown[] }).injected?.length;
  if (injected !== (variant === "none" ? 0 : INJECTORS)) throw new Error(`http turn ${variant}: injected ${injected}`);
  const labels = { none: "hookbox turn, no plugins", ts: `hookbox turn, ${INJECTORS} TS injectors`, wasm: `hookbox turn, ${INJECTORS} WASM injectors` };
  return {
    label: labels[variant],
    requests,
    check: () => assertNoPluginFailures(bc.core, `http turn ${variant}`),
    async close() {
      await server.close();
      await bc.close();
    },
  };
}

/** A Hono app outside hookbox: bare JSON echo, or one libSQL write transaction per request. */
async function honoTarget(withWrite: boolean, durability: Storage["durability"]): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), "hookbox-bench-hono-"));
  const path = join(dir, "floor.db");
  // hookbox's schema, then a writer of its own: one transaction (one commit) per request, on the
  // same native driver with kept statements and the same pragmas as hookbox's writer.
  const storage = withWrite ? await openStorage(`file:${path}`, { durability }) : undefined;
  const writer = storage ? new FileBatchWriter(path, writerPragmasFor(durability)) : undefined;
  // And its checkpoints as hookbox's: when writes pause, or a second after the first one not copied.
  const checkpoints = writer ? new IdleCheckpoint(() => writer.checkpoint()) : undefined;
  let seq = 0;
  const app = new Hono().post("/echo", async (c) => {
    const body = (await c.req.json()) as { message: string };
    // The same statement shape as a turn's append, committed on its own before the answer.
    if (writer) {
      writer.batch([
        {
          sql: "insert into messages (session_id, seq, role, content, tool_name, tokens, created_at) values ('floor', ?, 'user', ?, null, 8, ?)",
          args: [++seq, body.message, Date.now()],
        },
      ]);
      checkpoints!.wrote();
    }
    return c.json({ reply: `You said: ${body.message}` });
  });
  const server: RunningServer = await serveFetch(app.fetch, LOCAL);
  return {
    label: withWrite ? `Hono + 1 write transaction (${durability})` : "bare Hono JSON POST",
    requests: async (n) => Array.from({ length: n }, (_, i) => ({ url: `${server.url}/echo`, body: { message: `question ${i}: what is 6*7?` } })),
    async close() {
      await server.close();
      checkpoints?.close();
      writer?.close();
      await storage?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}


export async function runHttpTurn(opts: BenchOptions): Promise<Row[]> {
  const clients = opts.httpClients;
  const targets: Target[] = [];
  try {
    // Same durability as hookbox's default (the bench cores use the default config).
    targets.push(await honoTarget(false, "full"), await honoTarget(true, "full"));
    for (const v of ["none", "ts", "wasm"] as const) targets.push(await hookboxTarget(v));
    const results = new Map<Target, LoadResult[]>(targets.map((t) => [t, []]));
    progress(`HTTP: warm-up, ${targets.length} targets`);
    for (const t of targets) await runLoad(await t.requests(clients * 8, clients), clients);
    for (let round = 0; round < opts.httpRounds; round++) {
      // Rotate the order each round so no target always runs first or last.
      for (let k = 0; k < targets.length; k++) {
        const t = targets[(k + round) % targets.length]!;
        progress(`HTTP round ${round + 1}/${opts.httpRounds}: ${t.label}, ${opts.httpRequests} requests`);
        const warm = clients * 4;
        results.get(t)!.push(await runLoad(await t.requests(opts.httpRequests + warm, clients), clients, warm));
      }
    }
    for (const t of targets) t.check?.();
    const rps = (t: Target) => median(results.get(t)!.map((r) => (r.n / r.wall_ms) * 1000));
    const floor = rps(targets[1]!);
    const group = `HTTP POST, client process (${clientRuntime}), ${clients} conns, median of ${opts.httpRounds} rounds`;
    return targets.map((t, i) => {
      const rs = results.get(t)!;
      return {
        group,
        case: t.label,
        mean_ms: median(rs.map((r) => r.mean_ms)),
        p99_ms: median(rs.map((r) => r.p99_ms)),
        ops_per_s: rps(t),
        samples: rs.reduce((n, r) => n + r.n, 0),
        ...(i >= 1 ? { ratio: rps(t) / floor, note: i === 1 ? "ratio: req/s as a share of this floor" : "" } : { note: "outside floor: no storage" }),
      };
    });
  } finally {
    for (const t of targets) await t.close();
  }
}
