// The realistic bulk delete: 10,000 sessions indexed by the seed plugins (4 sidecar-index + 3
// task-tracker copies, 70,000 plugin KV rows written through their hooks and /task), deleted all at
// once and 1,000 of the 10,000, timed until the plugins' clean-up is persisted in libSQL and checked
// to leave 0 rows of the deleted sessions, against the bare delete of the same sessions (no plugins).
// Populating takes seconds per round, so each case runs once per round and the suite runs few rounds.
// A third case is the physical floor of the clean-up alone: the same KV rows deleted from a copy of
// the populated database in one raw SQLite transaction, by key range (the cheapest plan), no hookbox.
import { closeSync, existsSync, fsyncSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Core } from "../../runtime/core.ts";
import { writerPragmasFor } from "../../runtime/storage/db.ts";
import { openNative } from "../../runtime/storage/native.ts";
import { assertNoPluginFailures, openBenchCore } from "../lib/core.ts";
import { openIndexedCore } from "../lib/indexed.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";
import { median } from "../lib/measure.ts";

const N = 10_000;
const flush = (core: Core) => (core.plugins as { flush?: () => Promise<void> }).flush?.();

/**
 * Puts a database file and its WAL on the disk. A timed delete's commits wait for the disk, and on
 * ext4 (ordered data) a sync also writes out other files' pending data: the set-up's megabytes still
 * on their way there cost a timed delete 10-50 ms, a bare delete of 1,000 once 190 ms (it then read
 * 0.13x its seeded twin).
 */
function syncToDisk(path: string): void {
  for (const f of [path, `${path}-wal`]) {
    if (!existsSync(f)) continue;
    const fd = openSync(f, "r+");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
}

async function timeDelete(core: Core, ids: string[]): Promise<number> {
  core.storage.checkpoint(); // from a checkpointed WAL, bare and seeded alike (bulk-delete.ts)
  syncToDisk(core.config.db_url.slice("file:".length)); // and with the set-up's writes on the disk
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

async function seeded(count: number): Promise<{ ms: number; floorMs: number }> {
  const { indexed, ids } = await openIndexedCore(N);
  try {
    await indexed.populate(N);
    const victims = ids.slice(0, count);
    // The copy for the floor is made (and synced) before the delete, and its delete timed after:
    // the floor's writes are not on their way to the disk while hookbox's commits wait for it.
    const floor = copyForFloor(indexed.core);
    try {
      const ms = await timeDelete(indexed.core, victims);
      assertNoPluginFailures(indexed.core, `seed bulk delete ${count}`);
      const left = await indexed.rowsFor(victims);
      if (left !== 0) throw new Error(`seed bulk delete ${count}: ${left} plugin rows of deleted sessions left`);
      return { ms, floorMs: floor.rawKvDelete(victims) };
    } finally {
      floor.close();
    }
  } finally {
    await indexed.close();
  }
}

/**
 * A copy of the populated database for the clean-up's physical floor, on a connection set up as
 * hookbox's writer, its WAL already as long as a delete needs (as a live database's is: a commit
 * that first grows the file pays for that too, about 10 ms at 7,000 rows). `rawKvDelete` then
 * range-deletes the victims' KV rows there (one run of keys per plugin: the ids are neighbours) in
 * one transaction, its cache warmed by reading those rows first, checked to delete exactly the 7
 * rows per victim; it returns the ms.
 */
function copyForFloor(core: Core): { rawKvDelete(victims: readonly string[]): number; close(): void } {
  const dir = mkdtempSync(join(tmpdir(), "hookbox-floor-"));
  const copy = join(dir, "copy.db");
  const source = openNative(core.config.db_url.slice("file:".length));
  try {
    source.exec(`vacuum into '${copy}'`);
  } finally {
    source.close();
  }
  const db = openNative(copy);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("create table warm as select * from plugin_kv; drop table warm");
  db.prepare("PRAGMA wal_checkpoint(RESTART)").raw(true).all([]);
  for (const p of writerPragmasFor(core.config.db_synchronous)) db.exec(p);
  // Those 25 MB of writes on their way to the disk while hookbox's delete is timed cost it 10-50 ms.
  syncToDisk(copy);
  return {
    rawKvDelete(victims) {
      const first = victims[0]!;
      const last = victims[victims.length - 1]!;
      // Per plugin, sidecar-index's keys entry:<id> and task-tracker's task:<id>:<n>: one run each.
      const plugins = (db.prepare("select distinct plugin from plugin_kv").raw(true).all([]) as string[][]).map((r) => r[0]!);
      const runs = plugins.flatMap((p) => [
        [p, "entry:" + first, "entry:" + last],
        [p, "task:" + first + ":", "task:" + last + ";"],
      ]);
      const where = "plugin = ? and session_id = '' and key >= ? and key <= ?";
      const count = db.prepare(`select count(*) from plugin_kv where ${where}`).raw(true);
      const expected = runs.reduce((n, r) => n + Number((count.get(r) as unknown[])[0]), 0);
      if (expected !== victims.length * 7) throw new Error(`raw floor: ${expected} rows in the victims' key runs, not ${victims.length * 7}`);
      const del = db.prepare(`delete from plugin_kv where ${where}`);
      const t0 = performance.now();
      db.exec("BEGIN IMMEDIATE");
      let deleted = 0;
      for (const r of runs) deleted += del.run(r).changes;
      db.exec("COMMIT");
      const ms = performance.now() - t0;
      if (deleted !== expected) throw new Error(`raw floor: deleted ${deleted} rows, not ${expected}`);
      return ms;
    },
    close() {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function runSeedDelete(opts: BenchOptions): Promise<Row[]> {
  const rounds = opts.quick ? 1 : 2;
  const rows: Row[] = [];
  for (const count of [N, 1_000]) {
    const b: number[] = [];
    const s: number[] = [];
    const f: number[] = [];
    for (let r = 0; r < rounds; r++) {
      progress(`seed bulk delete ${count} of ${N}: bare, round ${r + 1}/${rounds}`);
      b.push(await bare(count));
      progress(`seed bulk delete ${count} of ${N}: 7 seed plugins (populating ${N} indexed sessions), round ${r + 1}/${rounds}`);
      const { ms, floorMs } = await seeded(count);
      s.push(ms);
      f.push(floorMs);
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
    rows.push({
      group,
      case: "raw SQLite: those KV rows range-deleted, 1 transaction (outside floor)",
      sessions: count,
      plugins: 0,
      mean_ms: median(f),
      samples: rounds,
      note: `clean-up alone, no hookbox; bare + this = ${((median(b) + median(f)) / median(b)).toFixed(2)}x bare`,
    });
  }
  return rows;
}
