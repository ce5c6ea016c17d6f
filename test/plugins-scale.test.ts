// The seed scenario at scale, at the shipped limits: 10,000 sessions indexed by 4 sidecar-index and
// 3 task-tracker copies (70,000 plugin KV rows), then a bulk delete of all of them, and of 1,000 of
// 10,000. Every plugin call must succeed and the plugins' clean-up must leave 0 rows of the deleted
// sessions (and every row of the others). No timing here: bench/ measures how long it takes.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { openIndexedCore } from "../bench/lib/indexed.ts";
import { assertNoPluginFailures, openBenchCore } from "../bench/lib/core.ts";
import { seedTrees } from "../bench/lib/seed.ts";

const N = 10_000;
const COPIES = 7;

async function scenario(deleteCount: number) {
  const { indexed, ids } = await openIndexedCore(N);
  try {
    const created = await indexed.populate(N);
    assert.equal(await indexed.rowsFor(created), N * COPIES, "every session indexed by every copy");
    const index = JSON.parse(await indexed.core.commands.run("index", "", { session_id: null, platform: "test", source: { user_id: null, chat_id: null, thread_id: null } }));
    assert.equal(index.count, N, "/index lists 10,000 live sessions within max_output_bytes and memory");
    const victims = ids.slice(0, deleteCount);
    const res = await indexed.core.deletion.remove({ reason: "delete", ids: victims });
    assert.equal(res.deleted_ids.length, deleteCount);
    await (indexed.core.plugins as { flush?: () => Promise<void> }).flush?.();
    assertNoPluginFailures(indexed.core, `bulk delete of ${deleteCount}`);
    assert.equal(await indexed.rowsFor(victims), 0, "no index entry or task of a deleted session is left");
    assert.equal(await indexed.rowsFor(ids.slice(deleteCount)), (N - deleteCount) * COPIES, "the other sessions keep theirs");
  } finally {
    await indexed.close();
  }
}

describe("seed plugins at scale (shipped limits)", () => {
  it("deleting all 10,000 indexed sessions leaves 0 plugin rows", () => scenario(N));
  it("deleting 1,000 of 10,000 indexed sessions leaves 0 rows for them and all rows of the rest", () => scenario(1_000));
});

describe("seed plugins past one host call's bounds", () => {
  it("an on_session_delete of 60,000 ids cleans up in parts (50,000 ids per hookbox_kv_delete_sessions)", async () => {
    const bc = await openBenchCore({ fleet: [{ from: "sidecar-index", prefix: "sidecar", count: 1 }] });
    try {
      const roots = await seedTrees(bc.core, 60_000);
      const ids = (await bc.core.storage.db.selectFrom("sessions").select("id").execute()).map((r) => r.id);
      assert.equal(ids.length, 60_000);
      const now = Date.now();
      await bc.core.storage.write(async (trx) => {
        for (let i = 0; i < ids.length; i += 5_000) {
          await trx.insertInto("plugin_kv").values(ids.slice(i, i + 5_000).map((id) => ({ plugin: "sidecar-00", session_id: "", key: `entry:${id}`, value: "{}", updated_at: now }))).execute();
        }
      });
      const res = await bc.core.deletion.remove({ reason: "delete", ids: roots });
      assert.equal(res.deleted_ids.length, 60_000);
      await (bc.core.plugins as { flush?: () => Promise<void> }).flush?.();
      assertNoPluginFailures(bc.core, "bulk delete of 60,000");
      const left = await bc.core.storage.db.selectFrom("plugin_kv").select("key").where("plugin", "=", "sidecar-00").execute();
      assert.deepEqual(left, [], "every entry of a deleted session is gone");
    } finally {
      await bc.close();
    }
  });
});
