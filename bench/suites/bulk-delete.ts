// on_session_delete with bulk deletes: seed cascade trees (untimed), remove their roots through the
// deletion service (the path HTTP, CLI and sweeps share), time the whole operation — transaction,
// hook fan-out and, with plugins, until their KV writes are in libSQL. 0 plugins is the bare delete.
import type { Core } from "../../runtime/core.ts";
import { assertNoPluginFailures, openBenchCore, type FleetSpec } from "../lib/core.ts";
import { measure } from "../lib/measure.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";
import { seedTrees } from "../lib/seed.ts";

/** The seed plugins that subscribe to on_session_delete, ten copies in all. */
export const DELETE_FLEET: readonly FleetSpec[] = [
  { from: "sidecar-index", prefix: "sidecar", count: 4 },
  { from: "task-tracker", prefix: "tasks", count: 3 },
  { from: "hostile/counter", prefix: "counter", count: 3 },
];

const fleetSize = DELETE_FLEET.reduce((n, s) => n + s.count, 0);

/** Waits for the plugins' background KV writes, when a plugin runtime is loaded. */
const flushPlugins = (core: Core) => (core.plugins as { flush?: () => Promise<void> }).flush?.();

async function timeDeletes(core: Core, size: number, opts: BenchOptions, rounds = opts.deleteRounds) {
  let roots: string[] = [];
  let removed = -1;
  const timing = await measure(
    `bulk delete ${size}`,
    async () => {
      const res = await core.deletion.remove({ reason: "delete", ids: roots });
      await flushPlugins(core);
      removed = res.deleted_ids.length;
    },
    {
      time: 0,
      iterations: rounds,
      warmupIterations: 1,
      // Each delete starts from a checkpointed WAL: the seeding's checkpoint, due a second after
      // its first write, would otherwise run inside some timed deletes and not others.
      beforeEach: async () => {
        roots = await seedTrees(core, size);
        core.storage.checkpoint();
      },
    },
  );
  assertNoPluginFailures(core, `bulk delete ${size}`);
  if (removed !== size) throw new Error(`bulk delete of ${size} removed ${removed} sessions`);
  return timing;
}

export async function runBulkDelete(opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  const bare = await openBenchCore();
  const fleet = await openBenchCore({ fleet: DELETE_FLEET });
  try {
    for (const size of opts.deleteSizes) {
      progress(`bulk delete ${size} sessions: bare`);
      const t0 = await timeDeletes(bare.core, size, opts);
      progress(`bulk delete ${size} sessions: ${fleetSize} WASM plugins`);
      const t1 = await timeDeletes(fleet.core, size, opts);
      const group = `bulk delete ${size.toLocaleString("en")} sessions`;
      const perSession = (ms: number) => `${((ms / size) * 1000).toFixed(1)} us/session`;
      rows.push({ group, case: "bare (0 plugins)", sessions: size, plugins: 0, mean_ms: t0.mean, p99_ms: t0.p99, samples: t0.samples, note: perSession(t0.mean) });
      rows.push({
        group,
        case: `${fleetSize} WASM plugins`,
        sessions: size,
        plugins: fleetSize,
        mean_ms: t1.mean,
        p99_ms: t1.p99,
        samples: t1.samples,
        ratio: t1.mean / t0.mean,
        note: perSession(t1.mean),
      });
    }
    // The bare cascade delete at the largest size a user runs (the seeding dominates: few rounds).
    progress("bulk delete 100,000 sessions: bare");
    const big = await timeDeletes(bare.core, 100_000, opts, opts.quick ? 1 : 3);
    rows.push({ group: "bulk delete 100,000 sessions", case: "bare (0 plugins)", sessions: 100_000, plugins: 0, mean_ms: big.mean, p99_ms: big.p99, samples: big.samples });
  } finally {
    await fleet.close();
    await bare.close();
  }
  return rows;
}
