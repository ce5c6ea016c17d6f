// A full HTTP turn on the embedded db: POST /v1/sessions/:id/turns through Hono, the turn service,
// the local provider and libSQL, with pre_llm_call answered by 10 injecting plugins (WASM copies of
// the inject fixture) vs 10 TS callbacks injecting the same text vs none. Concurrent clients, each
// on its own sessions (turns of one session run one at a time), a fresh session every few turns so
// the history stays a realistic size.
import { callbackSubscriber } from "../../hooks/dispatcher.ts";
import type { Core } from "../../runtime/core.ts";
import { startServer } from "../../runtime/server.ts";
import { assertNoPluginFailures, openBenchCore, type BenchCore } from "../lib/core.ts";
import { measure } from "../lib/measure.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";

const INJECTORS = 10;
const TURNS_PER_SESSION = 16;
const NOTE = "Reminder: answer briefly and cite the file you changed.";

type Variant = "none" | "ts" | "wasm";

function subscribeTsInjectors(core: Core): void {
  for (let i = 0; i < INJECTORS; i++) {
    core.dispatcher.subscribe(
      callbackSubscriber(`ts-inject-${String(i).padStart(2, "0")}`, ["pre_llm_call"], (p) => ({
        context: `${NOTE} (session ${p.session_id})`,
      })),
    );
  }
}

async function openVariant(variant: Variant): Promise<BenchCore> {
  if (variant === "wasm") return openBenchCore({ fleet: [{ from: "hostile/inject", prefix: "inject", count: INJECTORS }] });
  const bc = await openBenchCore();
  if (variant === "ts") subscribeTsInjectors(bc.core);
  return bc;
}

async function post(url: string, body: unknown): Promise<any> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const json = await res.json();
  if (res.status !== 200 && res.status !== 201) throw new Error(`POST ${url}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function runVariant(variant: Variant, opts: BenchOptions) {
  const bc = await openVariant(variant);
  const server = await startServer(bc.core, { host: "127.0.0.1", port: 0 });
  try {
    const total = opts.httpRequests + opts.httpClients * 4; // measured + warm-up
    const sessions: string[] = [];
    for (let i = 0; i < Math.ceil(total / TURNS_PER_SESSION) + opts.httpClients; i++) {
      sessions.push((await post(`${server.url}/v1/sessions`, { profile: "bench", platform: "bench" })).session.id);
    }
    let turn = 0;
    const oneTurn = async () => {
      const n = turn++;
      // Consecutive turn numbers land on different sessions: concurrent clients rarely share one.
      const sid = sessions[(n % opts.httpClients) + opts.httpClients * Math.floor(n / (opts.httpClients * TURNS_PER_SESSION))]!;
      const out = await post(`${server.url}/v1/sessions/${sid}/turns`, { message: `question ${n}: what is 6*7?` });
      const expected = variant === "none" ? 0 : INJECTORS;
      if (out.injected?.length !== expected) throw new Error(`turn injected ${out.injected?.length}, expected ${expected}`);
    };
    for (let i = 0; i < opts.httpClients * 4; i++) await oneTurn();
    const t = await measure(`http turn ${variant}`, oneTurn, {
      time: 600_000,
      iterations: opts.httpRequests,
      warmupIterations: 0,
      concurrency: opts.httpClients,
    });
    assertNoPluginFailures(bc.core, `http turn ${variant}`);
    return t;
  } finally {
    await server.close();
    await bc.close();
  }
}

export async function runHttpTurn(opts: BenchOptions): Promise<Row[]> {
  const group = `HTTP turn, ${opts.httpClients} clients`;
  const labels: Record<Variant, string> = {
    none: "no plugins",
    ts: `${INJECTORS} TS injectors (floor)`,
    wasm: `${INJECTORS} WASM injectors`,
  };
  const rows: Row[] = [];
  let floorRps = 0;
  for (const variant of ["none", "ts", "wasm"] as const) {
    progress(`HTTP turn: ${labels[variant]}, ${opts.httpRequests} requests`);
    const t = await runVariant(variant, opts);
    const rps = (t.samples / t.wall) * 1000;
    if (variant === "ts") floorRps = rps;
    rows.push({
      group,
      case: labels[variant],
      plugins: variant === "none" ? 0 : INJECTORS,
      mean_ms: t.mean,
      p99_ms: t.p99,
      ops_per_s: rps,
      samples: t.samples,
      // Throughput ratio, inverted so that > 1 means slower than the floor, like every other ratio.
      ...(variant === "wasm" ? { ratio: floorRps / rps, note: "ratio: floor req/s over this" } : {}),
    });
  }
  return rows;
}
