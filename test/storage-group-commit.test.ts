// Group commit (runtime/storage/group-commit.ts): batches of one event-loop turn share a write
// transaction, each caller gets its own results, and one batch that fails (a guard, a constraint)
// fails alone: the others are committed, nothing of it is.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { InStatement, ResultSet } from "@libsql/client";
import { openStorage } from "../runtime/storage/db.ts";
import { failUnless, isGuardFailure } from "../runtime/storage/guard.ts";
import { GroupCommit } from "../runtime/storage/group-commit.ts";

const dir = mkdtempSync(join(tmpdir(), "hookbox-group-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const insert = (key: string): InStatement => ({
  sql: "insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', ?, 'v', 1) returning key",
  args: [key],
});

describe("storage: group commit", () => {
  it("runs the batches of one turn as one transaction and hands each caller its own results", async () => {
    const commits: number[] = [];
    const group = new GroupCommit(async (stmts) => {
      commits.push(stmts.length);
      return stmts.map((s) => ({ rows: [[(s as { sql: string }).sql]] }) as unknown as ResultSet);
    });
    const stmt = (sql: string): InStatement => ({ sql, args: [] });
    const [a, b] = await Promise.all([group.batch([stmt("a1"), stmt("a2")]), group.batch([stmt("b1")])]);
    assert.deepEqual(commits, [3]);
    assert.deepEqual(a.map((r) => r.rows[0]![0]), ["a1", "a2"]);
    assert.deepEqual(b.map((r) => r.rows[0]![0]), ["b1"]);
    // A batch of a later turn is a transaction of its own.
    await group.batch([stmt("c1")]);
    assert.deepEqual(commits, [3, 1]);
  });

  it("on the embedded file, a batch whose guard fails fails alone; the others of its turn are committed", async () => {
    const storage = await openStorage(`file:${join(dir, "isolation.sqlite")}`);
    try {
      const outcomes = await Promise.allSettled([
        storage.batch([insert("a")]),
        storage.batch([{ sql: failUnless("1 = 0"), args: [] }, insert("b")]),
        storage.batch([insert("c")]),
        storage.batch([insert("a")]), // a primary key conflict with the first batch
      ]);
      assert.equal(outcomes[0].status, "fulfilled");
      assert.equal((outcomes[0] as PromiseFulfilledResult<ResultSet[]>).value[0]!.rows[0]!.key, "a");
      assert.equal(outcomes[1].status, "rejected");
      assert.ok(isGuardFailure((outcomes[1] as PromiseRejectedResult).reason));
      assert.equal(outcomes[2].status, "fulfilled");
      assert.equal(outcomes[3].status, "rejected");
      assert.match(String((outcomes[3] as PromiseRejectedResult).reason), /UNIQUE|constraint/i);
      const keys = await storage.client.execute("select key from plugin_kv order by key");
      assert.deepEqual(keys.rows.map((r) => r.key), ["a", "c"]);
    } finally {
      await storage.close();
    }
  });
});
