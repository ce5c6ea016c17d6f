// The seed scenario at scale, at the shipped limits: 10,000 sessions indexed by 4 sidecar-index and
// 3 task-tracker copies (70,000 plugin KV rows), then a bulk delete of all of them, and of 1,000 of
// 10,000. Every plugin call must succeed and the plugins' clean-up must leave 0 rows of the deleted
// sessions (and every row of the others). No timing here: bench/ measures how long it takes.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { openIndexedCore } from "../bench/lib/indexed.ts";
import { assertNoPluginFailures } from "../bench/lib/core.ts";

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
