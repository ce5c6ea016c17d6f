// A database made by an older hookbox keeps its data through the migrations: plugin KV moved into
// the clustered table (0005) keeps every row and its per-plugin usage, and the usage triggers still
// count what is written and deleted afterwards.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { Kysely } from "kysely";
import { LibsqlDialect } from "@libsql/kysely-libsql";
import { migrate } from "../runtime/storage/migrations.ts";

const dir = mkdtempSync(join(tmpdir(), "hookbox-migrations-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("storage: migrations", () => {
  it("0005 clusters plugin_kv by its key and keeps every row, its usage and the triggers", async () => {
    const client = createClient({ url: `file:${join(dir, "old.sqlite")}` });
    const db = new Kysely<any>({ dialect: new LibsqlDialect({ client }) });
    try {
      await migrate(db, "0004_plugin_kv_session_partial");
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
      await client.execute("delete from plugin_kv where plugin = 'p1'");
      const usage = await client.execute("select plugin, keys from plugin_kv_usage order by plugin");
      assert.deepEqual(usage.rows.map((r) => [r.plugin, r.keys]), [["p0", 101], ["p1", 0], ["p2", 100]]);
      const index = await client.execute("select count(*) as n from sqlite_master where name = 'plugin_kv_session'");
      assert.equal(index.rows[0]!.n, 1);
    } finally {
      await db.destroy();
    }
  });
});
