// storage.batch on the embedded file (a native writer connection with kept statements): one
// transaction that commits whole or not at all, results shaped like the client's (named and indexed
// columns, rowsAffected), the durability setting applied, and a statement run again after a failed
// batch still works (the connection is not left inside a transaction).
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { openStorage, type Durability } from "../runtime/storage/db.ts";
import { failUnless, isGuardFailure } from "../runtime/storage/guard.ts";

const dir = mkdtempSync(join(tmpdir(), "hookbox-batch-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const INSERT = "insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', ?, ?, 1)";

async function open(name: string, durability: Durability = "full") {
  return openStorage(`file:${join(dir, `${name}.sqlite`)}`, { durability });
}

describe("storage: batch on the embedded file", () => {
  it("returns rows with named and indexed columns, and rowsAffected for writes", async () => {
    const storage = await open("shape");
    try {
      const [ins, sel, del] = await storage.batch([
        { sql: INSERT, args: ["a", "1"] },
        { sql: "select key, value from plugin_kv where plugin = ?1 order by key", args: ["p"] },
        { sql: "delete from plugin_kv where key = ?", args: ["nothing"] },
      ]);
      assert.equal(ins!.rowsAffected, 1);
      assert.equal(sel!.rows.length, 1);
      assert.equal(sel!.rows[0]!.key, "a");
      assert.equal(sel!.rows[0]![1], "1");
      assert.deepEqual(sel!.columns, ["key", "value"]);
      assert.equal(del!.rowsAffected, 0);
      // Values the client converts (booleans, dates) are converted the same way.
      const [conv] = await storage.batch([{ sql: "select ?1 as b, ?2 as d", args: [true, new Date(5)] }]);
      assert.deepEqual([conv!.rows[0]!.b, conv!.rows[0]!.d], [1, 5]);
      // A column name that is already a key of the row (an index, "length", a duplicate) is skipped, as the client does.
      const [odd] = await storage.batch([{ sql: `select 'x' as length, 'y' as "0", 'z' as dup, 'w' as dup`, args: [] }]);
      assert.deepEqual([odd!.rows[0]!.length, odd!.rows[0]![0], odd!.rows[0]!.dup], [4, "x", "z"]);
      // The same statement again (kept prepared) with other arguments.
      const [again] = await storage.batch([{ sql: "select key, value from plugin_kv where plugin = ?1 order by key", args: ["q"] }]);
      assert.equal(again!.rows.length, 0);
    } finally {
      await storage.close();
    }
  });

  it("commits nothing of a batch whose statement fails, and the next batch commits", async () => {
    const storage = await open("atomic");
    try {
      await assert.rejects(
        storage.batch([
          { sql: INSERT, args: ["first", "1"] },
          { sql: failUnless("1 = 0"), args: [] },
          { sql: INSERT, args: ["second", "2"] },
        ]),
        (err) => isGuardFailure(err),
      );
      await assert.rejects(storage.batch([{ sql: INSERT, args: ["dup", "1"] }, { sql: INSERT, args: ["dup", "2"] }]), /UNIQUE|constraint/i);
      await storage.batch([{ sql: INSERT, args: ["after", "3"] }]);
      const rows = await storage.client.execute("select key from plugin_kv order by key");
      assert.deepEqual(rows.rows.map((r) => r.key), ["after"]);
    } finally {
      await storage.close();
    }
  });

  it("runs with the durability setting: full (the default) answers after the WAL's fsync, run off the thread; normal without", async () => {
    for (const durability of ["full", "normal"] as const) {
      const storage = await open(`sync-${durability}`, durability);
      try {
        // The batch connection itself never fsyncs in COMMIT (NORMAL): with "full" the batch waits for wal-sync.ts.
        const [res] = await storage.batch([{ sql: "PRAGMA synchronous", args: [] }]);
        assert.equal(Number(res!.rows[0]![0]), 1, durability);
        assert.equal(storage.walSyncs(), durability === "full" ? 1 : 0, durability);
        // So do transactions through `write`.
        const level = await storage.write(async (trx) => (await sql<{ synchronous: number }>`PRAGMA synchronous`.execute(trx)).rows[0]!.synchronous);
        assert.equal(Number(level), 1, durability);
        assert.equal(storage.walSyncs(), durability === "full" ? 2 : 0, durability);
      } finally {
        await storage.close();
      }
    }
  });
});
