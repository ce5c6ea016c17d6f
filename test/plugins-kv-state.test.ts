// Plugin KV as the database keeps it, through HTTP with real WASM plugins, on the embedded file and
// on a real libSQL server: a plugin reads the KV of the sessions being deleted during its
// on_session_delete (then the rows are purged), and a write beyond the plugin's quota fails the
// call as `quota` with nothing of it written.
import { describe, it, after, before } from "node:test";
import assert from "node:assert/strict";
import { TEST_DBS } from "./helpers/dialects.ts";
import { command, newSession, pluginInfo, startPluginServer, HOSTILE_DIR, type PluginServer } from "./helpers/plugins.ts";

for (const db of TEST_DBS) {
  describe(`plugin KV state [${db}]`, () => {
    let s: PluginServer;
    before(async () => {
      s = await startPluginServer({ dir: HOSTILE_DIR, enabled: ["books"], grants: { books: ["kv"] }, kv_quota: { keys: 40, bytes: 1_000_000 } }, { db });
    });
    after(() => s.close());

    const books = async () => JSON.parse((await command(s, "books", {})).body.output);
    const kvRows = async (ids: readonly string[]) =>
      (await s.core.storage.db.selectFrom("plugin_kv").select("session_id").where("session_id", "in", [...ids]).execute()).length;

    it("on_session_delete reads each deleted session's own KV; the rows are purged after it", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await newSession(s, `books-${i}`));
      assert.equal(await kvRows(ids), 5, "one session-scoped resource row each");
      const del = await s.api("POST", "/v1/sessions/bulk-delete", { ids: ids.slice(0, 3) });
      assert.equal(del.status, 200);
      assert.deepEqual(await books(), { opened: 5, released: 3, missing: 0 }, "every deleted session's resource was readable and released");
      assert.equal(await kvRows(ids.slice(0, 3)), 0, "purged after the hook");
      assert.equal(await kvRows(ids.slice(3)), 2, "the others keep theirs");
      const tomb = await s.core.storage.db.selectFrom("session_tombstones").select("id").where("id", "in", ids.slice(0, 3)).execute();
      assert.equal(tomb.length, 3, "tombstones keep late writes for the deleted sessions out");
    });

    it("the sweep removes what a process that died before its purge left, after the grace period", async () => {
      const db = s.core.storage.db;
      const now = Date.now();
      await db.insertInto("plugin_kv").values([
        { plugin: "books", session_id: "s_died", key: "resource", value: "res", updated_at: now },
        { plugin: "books", session_id: "s_raced", key: "resource", value: "res", updated_at: now - 3_600_000 },
      ]).execute();
      await db.insertInto("session_tombstones").values({ id: "s_died", deleted_at: now - 1_000 }).execute();
      assert.equal(await s.core.kv.sweep(600_000), 1, "within the grace period only the old orphan goes");
      assert.equal(await kvRows(["s_died", "s_raced"]), 1);
      assert.equal(await s.core.kv.sweep(500), 1, "past it, the tombstoned session's KV goes too");
      assert.equal(await kvRows(["s_died", "s_raced"]), 0);
    });

    it("a write beyond the KV quota fails the call as quota and writes nothing of it", async () => {
      const ok = await command(s, "fill", { raw_args: "10" });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      const over = await command(s, "fill", { raw_args: "60" });
      assert.equal(over.status, 422, JSON.stringify(over.body));
      assert.match(over.body.error.message, /failed \(quota\): kv quota of books reached/);
      const fills = await s.core.storage.db.selectFrom("plugin_kv").select("key").where("plugin", "=", "books").where("key", "like", "fill:%").execute();
      assert.equal(fills.length, 10, "the refused call's writes were dropped whole");
      assert.ok((await pluginInfo(s, "books")).stats.failures.quota >= 1);
      const usage = await s.core.storage.db.selectFrom("plugin_kv_usage").selectAll().where("plugin", "=", "books").executeTakeFirst();
      const rows = await s.core.storage.db.selectFrom("plugin_kv").select(["key", "value"]).where("plugin", "=", "books").execute();
      assert.equal(usage?.keys, rows.length, "the usage the quota reads matches the rows");
    });
  });
}
