// The realistic bulk delete: 10,000 sessions indexed by the seed plugins (4 sidecar-index + 3
// task-tracker copies, 70,000 plugin KV rows written through their hooks and /task), deleted all at
// once and 1,000 of the 10,000, timed until the plugins' clean-up is persisted in libSQL and checked
// to leave 0 rows of the deleted sessions, against the bare delete of the same sessions (no plugins).
// Populating takes seconds per round, so each case runs once per round and the suite runs few rounds.
import type { Core } from "../../runtime/core.ts";
import { assertNoPluginFailures, openBenchCore } from "../lib/core.ts";
import { openIndexedCore } from "../lib/indexed.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";
import { median } from "../lib/measure.ts";

const N = 10_000;
const flush = (core: Core) => (core.plugins as { flush?: () => Promise<void> }).flush?.();

async function timeDelete(core: Core, ids: string[]): Promise<number> {
  const t0 = performance.now();
  const res = await core.deletion.remove({ reason: "delete", ids });
  await flush(core);
  const ms = performance.now() - t0;
  if (res.deleted_ids.length !== ids.length) throw new Error(`deleted ${res.deleted_ids.length} of ${ids.length}`);
  return ms;
}

async function bare(count: number): Promise<number> {
  const bc = await openBenchCore();
  try {
    const now = Date.now();
    const ids = Array.from({ length: N }, (_, i) => `s_bare_${String(i).padStart(6, "0")}`);
    await bc.core.storage.write(async (trx) => {
      for (let i = 0; i < N; i += 500) {
        await trx.insertInto("sessions").values(ids.slice(i, i + 500).map((id) => ({ id, profile: "bench", platform: "bench", created_at: now, updated_at: now }))).execute();
      }
    });
    return await timeDelete(bc.core, ids.slice(0, count));
  } finally {
    await bc.close();
  }
}

async function seeded(count: number): Promise<number> {
  const { indexed, ids } = await openIndexedCore(N);
  try {
    await indexed.populate(N);
    const victims = ids.slice(0, count);
    const ms = await timeDelete(indexed.core, victims);
    assertNoPluginFailures(indexed.core, `seed bulk delete ${count}`);
    const left = await indexed.rowsFor(victims);
    if (left !== 0) throw new Error(`seed bulk delete ${count}: ${left} plugin rows of deleted sessions left`);
    return ms;
  } finally {
    await indexed.close();
  }
}


export async function runSeedDelete(opts: BenchOptions): Promise<Row[]> {
  const rounds = opts.quick ? 1 : 2;
  const rows: Row[] = [];
  for (const count of [N, 1_000]) {
    const b: number[] = [];
    const s: number[] = [];
    for (let r = 0; r < rounds; r++) {
      progress(`seed bulk delete ${count} of ${N}: bare, round ${r + 1}/${rounds}`);
      b.push(await bare(count));
      progress(`seed bulk delete ${count} of ${N}: 7 seed plugins (populating ${N} indexed sessions), round ${r + 1}/${rounds}`);
      s.push(await seeded(count));
    }
    const group = `bulk delete ${count.toLocaleString("en")} of ${N.toLocaleString("en")} indexed sessions`;
    rows.push({ group, case: "bare (0 plugins)", sessions: count, plugins: 0, mean_ms: median(b), samples: rounds });
    rows.push({
      group,
      case: "4 sidecar-index + 3 task-tracker",
      sessions: count,
      plugins: 7,
      mean_ms: median(s),
      samples: rounds,
      ratio: median(s) / median(b),
      note: `until clean-up persisted; ${count * 7} KV rows removed, 0 left`,
    });
  }
  return rows;
}
