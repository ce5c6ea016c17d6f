// A database made by an older hookbox keeps its data through the migrations: plugin KV moved into
// the clustered table (0005) keeps every row and its per-plugin usage, the usage triggers still count
// what is written afterwards, and a delete counts itself (0010 dropped the delete trigger); with the leaner session indexes (0007) every list
// still returns every session in order, and 0007 finishes after a crash half-way through it; the
// clustered tombstones (0008) keep every deleted id, also when a crash left the copy half-made.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type Client } from "@libsql/client";
import { Kysely } from "kysely";
import { LibsqlDialect } from "@libsql/kysely-libsql";
import { migrate, migrationDb } from "../runtime/storage/migrations.ts";
import { listQuery } from "../runtime/sessions/service.ts";
import { countedDelete } from "../runtime/storage/kv-usage.ts";

const dir = mkdtempSync(join(tmpdir(), "hookbox-migrations-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A new database file `name`, migrated up to `to` only, handed to `use`, closed afterwards. */
async function olderDatabase(name: string, to: string, use: (db: Kysely<any>, client: Client) => Promise<void>): Promise<void> {
  const client = createClient({ url: `file:${join(dir, name)}` });
  const db = new Kysely<any>({ dialect: new LibsqlDialect({ client }) });
  try {
    await migrate(db, to);
    await use(db, client);
  } finally {
    await db.destroy();
  }
}

/** A Kysely plugin that fails the `n`-th statement it sees: a process dying there, as the database sees it. */
const failingAt = (n: number) => {
  let seen = 0;
  return {
    transformQuery(args: { node: any }) {
      if (++seen === n) throw new Error(`stopped at statement ${n}`);
      return args.node;
    },
    async transformResult(args: { result: any }) {
      return args.result;
    },
  };
};

describe("storage: a migration run that stops half-way", () => {
  // A process killed while it migrated left tables no later start could create again ("table
  // sessions already exists"): run through migrationDb, the run commits whole or not at all.
  it("leaves nothing behind, wherever it stops: the next run migrates and opens", async () => {
    const stops = [5, 12, 20, 35, 50];
    for (const n of stops) {
      const client = createClient({ url: `file:${join(dir, `stopped-${n}.sqlite`)}` });
      const db = migrationDb(client);
      try {
        await assert.rejects(migrate(db.withPlugin(failingAt(n))), /stopped at statement/);
        await migrate(db);
        const names = await client.execute("select count(*) as n from kysely_migration");
        assert.equal(Number(names.rows[0]!.n), 10, `stopped at ${n}`);
      } finally {
        await db.destroy();
      }
    }
    // Without the transaction, the same stop leaves a database the next run cannot migrate.
    const client = createClient({ url: `file:${join(dir, "stopped-plain.sqlite")}` });
    const plain = new Kysely<any>({ dialect: new LibsqlDialect({ client }) });
    try {
      await assert.rejects(migrate(plain.withPlugin(failingAt(12))), /stopped at statement/);
      await assert.rejects(migrate(plain), /already exists/);
    } finally {
      await plain.destroy();
    }
  });
});

describe("storage: migrations", () => {
  it("0005 clusters plugin_kv by its key and keeps every row, its usage and the triggers; after 0010 deletes count themselves", async () => {
    await olderDatabase("old.sqlite", "0004_plugin_kv_session_partial", async (db, client) => {
      const rows = Array.from({ length: 300 }, (_, i) => [`p${i % 3}`, i % 2 === 0 ? "" : `s${i}`, `k${i}`, `value ${i}`, i]);
      await client.execute({
        sql: `insert into plugin_kv (plugin, session_id, key, value, updated_at)
          select value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 from json_each(?)`,
        args: [JSON.stringify(rows)],
      });
      const before = await client.execute("select plugin, keys, bytes from plugin_kv_usage order by plugin");
      await migrate(db);
      const table = await client.execute("select sql from sqlite_master where name = 'plugin_kv'");
      assert.match(String(table.rows[0]!.sql), /without rowid/i);
      const after = await client.execute("select plugin, session_id, key, value, updated_at from plugin_kv order by updated_at");
      assert.deepEqual(after.rows.map((r) => [r.plugin, r.session_id, r.key, r.value, r.updated_at]), rows);
      assert.deepEqual((await client.execute("select plugin, keys, bytes from plugin_kv_usage order by plugin")).rows, before.rows);
      await client.execute("insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p0', '', 'new', 'abc', 1)");
      const triggers = await client.execute("select name from sqlite_master where type = 'trigger' and tbl_name = 'plugin_kv' order by name");
      assert.deepEqual(triggers.rows.map((r) => r.name), ["plugin_kv_usage_insert", "plugin_kv_usage_update"]);
      for (const stmt of countedDelete("from plugin_kv k where k.plugin = 'p1'")) await client.execute(stmt);
      const usage = await client.execute("select plugin, keys from plugin_kv_usage order by plugin");
      assert.deepEqual(usage.rows.map((r) => [r.plugin, r.keys]), [["p0", 101], ["p1", 0], ["p2", 100]]);
      const index = await client.execute("select count(*) as n from sqlite_master where name = 'plugin_kv_session'");
      assert.equal(index.rows[0]!.n, 1);
    });
  });

  it("0007 lists every session of an older database, in order, from the indexes that are left", async () => {
    await olderDatabase("lists.sqlite", "0006_idempotency_content_type", async (db, client) => {
      // archived 2: written by no hookbox, read as "not archived" before; it must stay listed.
      const rows = Array.from({ length: 30 }, (_, i) => ({
        id: `s${String(i).padStart(2, "0")}`,
        profile: i % 2 === 0 ? "a" : "b",
        archived: i % 5 === 0 ? 1 : i === 7 ? 2 : 0,
        parent_session_id: i > 0 && i % 3 === 0 ? `s${String(i - 1).padStart(2, "0")}` : null,
        created_at: 1000 + (i % 10),
        updated_at: 1,
      }));
      await db.insertInto("sessions").values(rows).execute();
      await migrate(db);
      const ids = async (f: Parameters<typeof listQuery>[1], anchor?: { created_at: number; id: string }) =>
        (await listQuery(db, f, anchor).execute()).map((r) => r.id);
      const byOrder = [...rows].sort((x, y) => x.created_at - y.created_at || (x.id < y.id ? -1 : 1));
      assert.deepEqual(await ids({ limit: 100 }), byOrder.map((r) => r.id));
      assert.deepEqual(await ids({ limit: 4 }, { created_at: 1003, id: "s13" }), byOrder.slice(byOrder.findIndex((r) => r.id === "s13") + 1).slice(0, 4).map((r) => r.id));
      assert.deepEqual(await ids({ limit: 100, profile: "b" }), byOrder.filter((r) => r.profile === "b").map((r) => r.id));
      assert.deepEqual(await ids({ limit: 100, archived: false }), byOrder.filter((r) => r.archived !== 1).map((r) => r.id));
      assert.deepEqual(await ids({ limit: 100, archived: true, profile: "a" }), byOrder.filter((r) => r.archived === 1 && r.profile === "a").map((r) => r.id));
      const children = await client.execute("select id from sessions where parent_session_id = 's08'");
      assert.deepEqual(children.rows.map((r) => r.id), ["s09"]);
    });
  });

  it("0007 runs again to the end after a process died half-way through it", async () => {
    await olderDatabase("half.sqlite", "0006_idempotency_content_type", async (db, client) => {
      // Its first steps ran (each DDL statement commits on its own), the migration was never recorded.
      await client.execute("drop index sessions_list");
      await client.execute("drop index sessions_parent");
      await migrate(db);
      const indexes = await client.execute("select name from sqlite_master where tbl_name = 'sessions' and type = 'index' and sql is not null order by name");
      assert.deepEqual(
        indexes.rows.map((r) => r.name),
        ["sessions_compacted_from", "sessions_list_archived", "sessions_list_profile_archived", "sessions_parent"],
      );
    });
  });

  it("0008 clusters the tombstones by id and keeps every one, also after a crash half-way through it", async () => {
    for (const crash of [false, true]) {
      await olderDatabase(`tombstones-${crash}.sqlite`, "0007_lean_session_indexes", async (db, client) => {
        const rows = Array.from({ length: 50 }, (_, i) => [`s${String(i).padStart(2, "0")}`, 1000 + i]);
        await client.execute({ sql: "insert into session_tombstones (id, deleted_at) select value ->> 0, value ->> 1 from json_each(?)", args: [JSON.stringify(rows)] });
        if (crash) {
          // The copy was made and took some rows, the old table is still there, nothing recorded.
          await client.execute("create table session_tombstones_clustered (id text primary key not null, deleted_at integer not null) without rowid");
          await client.execute("insert into session_tombstones_clustered select * from session_tombstones where id < 's10'");
        }
        await migrate(db);
        const table = await client.execute("select sql from sqlite_master where name = 'session_tombstones'");
        assert.match(String(table.rows[0]!.sql), /without rowid/i);
        const after = await client.execute("select id, deleted_at from session_tombstones order by id");
        assert.deepEqual(after.rows.map((r) => [r.id, r.deleted_at]), rows);
        const leftover = await client.execute("select count(*) as n from sqlite_master where name = 'session_tombstones_clustered'");
        assert.equal(leftover.rows[0]!.n, 0);
      });
    }
  });
});
