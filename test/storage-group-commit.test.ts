// Group commit (runtime/storage/group-commit.ts): batches of one event-loop turn share a write
// transaction, each caller gets its own results, and one batch that fails (a guard, a constraint)
// fails alone: the others are committed, nothing of it is. With "full" durability a batch is
// answered only once the WAL has been synced after its commit (runtime/storage/wal-sync.ts), by a
// sync that batches committed meanwhile share.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { InStatement, ResultSet } from "@libsql/client";
import { openStorage } from "../runtime/storage/db.ts";
import { failUnless, isGuardFailure } from "../runtime/storage/guard.ts";
import { GroupCommit } from "../runtime/storage/group-commit.ts";
import { WalSync } from "../runtime/storage/wal-sync.ts";

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

  it("answers a batch only after a WAL sync that began after its commit; commits made meanwhile share the next one", async () => {
    const syncs: Array<() => void> = [];
    const wal = new WalSync(() => new Promise<void>((resolve) => syncs.push(resolve)));
    const events: string[] = [];
    const committed = new GroupCommit(async (stmts) => {
      events.push(`commit ${(stmts[0] as { sql: string }).sql}`);
      return stmts.map(() => ({ rows: [] }) as unknown as ResultSet);
    }, () => wal.durable());
    const answered = (name: string) => (r: unknown) => (events.push(`answered ${name}`), r);
    const a = committed.batch([{ sql: "a", args: [] }]).then(answered("a"));
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    // a is committed, its sync running; b and c commit in two later turns while it runs.
    const b = committed.batch([{ sql: "b", args: [] }]).then(answered("b"));
    await new Promise((r) => setImmediate(r));
    const c = committed.batch([{ sql: "c", args: [] }]).then(answered("c"));
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(events, ["commit a", "commit b", "commit c"], "nothing answered before a sync finished");
    assert.equal(syncs.length, 1, "the second sync waits for the first");
    syncs[0]!();
    await a;
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(events.slice(3), ["answered a"], "b and c committed after the first sync began: not covered by it");
    assert.equal(syncs.length, 2, "one more sync, for b and c together");
    syncs[1]!();
    await Promise.all([b, c]);
    assert.deepEqual(events.slice(4).sort(), ["answered b", "answered c"]);
    assert.equal(wal.syncs, 2);
  });

  it("a sync that fails fails the batches waiting for it, runs none of them again, and every later write fails too", async () => {
    const wal = new WalSync(async () => {
      throw new Error("EIO: i/o error, fdatasync");
    });
    const commits: string[] = [];
    const committed = new GroupCommit(async (stmts) => {
      commits.push(...stmts.map((s) => (s as { sql: string }).sql));
      return stmts.map(() => ({ rows: [] }) as unknown as ResultSet);
    }, () => wal.durable());
    const outcomes = await Promise.allSettled([committed.batch([{ sql: "a", args: [] }]), committed.batch([{ sql: "b", args: [] }])]);
    for (const o of outcomes) {
      assert.equal(o.status, "rejected");
      assert.match(String((o as PromiseRejectedResult).reason), /committed, but the database's WAL could not be synced to disk \(EIO.*\); no write is durable until hookbox restarts/);
    }
    assert.deepEqual(commits, ["a", "b"], "committed once, never again");
    // Frames that never reached the disk stop crash recovery there: no later sync can vouch for what follows.
    await assert.rejects(committed.batch([{ sql: "c", args: [] }]), /no write is durable until hookbox restarts/);
    assert.equal(wal.syncs, 0);
    assert.match(wal.fault?.message ?? "", /EIO/);
  });

  it("syncs the WAL SQLite itself writes, through a symlinked or %-encoded path too; a missing WAL is a failure", async () => {
    mkdirSync(join(dir, "real"));
    symlinkSync(join(dir, "real"), join(dir, "link"));
    for (const url of [`file:${join(dir, "link", "via-link.sqlite")}`, `file:${join(dir, "real", "my%20db.sqlite")}`]) {
      const storage = await openStorage(url);
      try {
        await storage.batch([insert("k")]);
        assert.equal(storage.walSyncs(), 1, url);
        assert.equal(storage.durabilityFault(), undefined, url);
      } finally {
        await storage.close();
      }
    }
    await assert.rejects(WalSync.forDatabase(join(dir, "no-such.sqlite")).durable(), /could not be synced to disk \(ENOENT/);
  });

  it("on the embedded file with full durability, batches wait for a WAL sync; with normal, for none", async () => {
    for (const durability of ["full", "normal"] as const) {
      const storage = await openStorage(`file:${join(dir, `durable-${durability}.sqlite`)}`, { durability });
      try {
        await Promise.all([storage.batch([insert("x")]), storage.batch([insert("y")])]);
        await storage.batch([insert("z")]);
        if (durability === "full") assert.ok(storage.walSyncs() >= 1 && storage.walSyncs() <= 2, `${storage.walSyncs()} syncs`);
        else assert.equal(storage.walSyncs(), 0);
        const keys = await storage.client.execute("select key from plugin_kv order by key");
        assert.deepEqual(keys.rows.map((r) => r.key), ["x", "y", "z"]);
      } finally {
        await storage.close();
      }
    }
  });
});
