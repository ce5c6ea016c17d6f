// Round trips to a libSQL server (sqld) for the operations plugins make shared state of, counted at
// a proxy in front of sqld: a turn with the seed plugins (its writes: the messages' batch and the KV
// group commit), and a 1,000-session bulk delete's plugin clean-up (KV commit and purge: O(1) batches
// whatever the number of keys). Also the latency of one plugin KV read (synchronous, at the database)
// on the embedded file and on sqld.
import { startSqld } from "../../test/helpers/sqld.ts";
import { openBenchCore, assertNoPluginFailures, type FleetSpec } from "../lib/core.ts";
import { startCountingProxy } from "../lib/counting-proxy.ts";
import { measure } from "../lib/measure.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";

const SEEDS: readonly FleetSpec[] = [
  { from: "memory-reinject", prefix: "reinject", count: 1, firstKeepsCommands: true },
  { from: "sidecar-index", prefix: "sidecar", count: 1, firstKeepsCommands: true },
  { from: "task-tracker", prefix: "tasks", count: 1, firstKeepsCommands: true },
];
const GROUP = "round trips on sqld";

/** Writes the core sends as batches or transactions while `fn` runs. */
function countWrites(core: { storage: { batch: (...a: any[]) => any; write: (...a: any[]) => any } }) {
  let n = 0;
  const { batch, write } = core.storage;
  core.storage.batch = (...a: any[]) => (n++, batch(...a));
  core.storage.write = (...a: any[]) => (n++, write(...a));
  return { get: () => n, reset: () => void (n = 0) };
}

async function sqldRoundTrips(opts: BenchOptions): Promise<Row[]> {
  const sqld = await startSqld();
  const proxy = await startCountingProxy(sqld.url);
  const bc = await openBenchCore({ fleet: SEEDS, config: { db_url: proxy.url } });
  try {
    const { core } = bc;
    const writes = countWrites(core);
    const session = await core.sessions.create({ platform: "bench", source: { user_id: "u", chat_id: "c" } });
    await core.turns.run(session.id, "warm up");
    const turns = opts.quick ? 10 : 40;
    // HTTP requests at the proxy, plus the KV reader's queries (one WebSocket frame each way).
    const trips = () => proxy.requests + core.kv.readRoundTrips;
    const r0 = trips();
    writes.reset();
    for (let i = 0; i < turns; i++) await core.turns.run(session.id, `turn ${i}`);
    const perTurn = (trips() - r0) / turns;
    const writesPerTurn = writes.get() / turns;

    const N = 1_000;
    progress(`round trips: creating ${N} sessions indexed by sidecar-index`);
    const ids: string[] = [];
    for (let i = 0; i < N; i++) ids.push((await core.sessions.create({ platform: "bench", source: { user_id: `u${i}`, chat_id: `c${i}` } })).id);
    await core.kv.flush();
    const kvBefore = core.kv.writeRoundTrips;
    const r1 = trips();
    writes.reset();
    await core.deletion.remove({ reason: "delete", ids });
    await core.kv.flush();
    const deleteTrips = trips() - r1;
    const cleanupWrites = core.kv.writeRoundTrips - kvBefore;
    assertNoPluginFailures(core, "round trips");
    const left = await core.storage.db.selectFrom("plugin_kv").select((eb) => eb.fn.countAll().as("n")).where("session_id", "in", ids.slice(0, 500)).executeTakeFirst();
    if (Number(left?.n ?? 0) !== 0) throw new Error("plugin rows of deleted sessions left behind");
    return [
      { group: GROUP, case: "turn with 3 seed plugins: all round trips", mean_ms: undefined, note: `${perTurn.toFixed(1)} per turn (reads included), ${turns} turns` },
      { group: GROUP, case: "turn: write round trips (target <= 2)", met: writesPerTurn <= 2, note: `${writesPerTurn.toFixed(2)} per turn (messages batch + KV group commit)` },
      { group: GROUP, case: `bulk delete of ${N} indexed sessions: all round trips`, note: `${deleteTrips} (cascade, on_session_delete reads, clean-up)` },
      { group: GROUP, case: "plugin clean-up write round trips (target O(1): <= 3)", met: cleanupWrites <= 3, note: `${cleanupWrites} for ${N} sessions (KV commit; a purge when session-scoped KV exists)` },
    ];
  } finally {
    await bc.close();
    await proxy.close();
    await sqld.stop();
  }
}

/** One KV read as a plugin's kv_get does it (a point lookup at the database). */
async function readLatency(opts: BenchOptions, url?: string): Promise<{ mean: number; p99: number; samples: number }> {
  const bc = await openBenchCore(url ? { config: { db_url: url } } : {});
  try {
    const { core } = bc;
    await core.storage.batch([{ sql: "insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', 'k', 'value', 0)", args: [] }]);
    return await measure("kv read", () => core.kv.get("p", "", "k"), { time: opts.quick ? 200 : 1000, iterations: 100 });
  } finally {
    await bc.close();
  }
}

export async function runRoundTrips(opts: BenchOptions): Promise<Row[]> {
  progress("round trips on sqld");
  const rows = await sqldRoundTrips(opts);
  progress("kv read latency: file, sqld");
  const file = await readLatency(opts);
  const sqld = await startSqld();
  try {
    const remote = await readLatency(opts, sqld.url);
    rows.push(
      { group: "plugin KV read (kv_get)", case: "embedded file", mean_ms: file.mean, p99_ms: file.p99, samples: file.samples },
      { group: "plugin KV read (kv_get)", case: "sqld (worker + Atomics.wait)", mean_ms: remote.mean, p99_ms: remote.p99, samples: remote.samples },
    );
  } finally {
    await sqld.stop();
  }
  return rows;
}
