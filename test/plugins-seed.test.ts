// The seed plugins, built to WASM and loaded by the real runtime, driven only through the HTTP API.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { TEST_DBS } from "./helpers/dialects.ts";
import { command, newSession, seedLongHistory, pluginInfo, startPluginServer, turn, SEED_DIR, type PluginServer } from "./helpers/plugins.ts";

const SEEDS = ["memory-reinject", "sidecar-index", "task-tracker", "whoami"];
const KV = { "memory-reinject": ["kv"], "sidecar-index": ["kv"], "task-tracker": ["kv"] };

for (const db of TEST_DBS) {
  describe(`seed plugins over HTTP [${db}]`, () => {
    let s: PluginServer;
    before(async () => {
      s = await startPluginServer({ dir: SEED_DIR, enabled: SEEDS, grants: KV }, { db });
    });
    after(() => s.close());

    it("lists every seed plugin active with its granted capabilities", async () => {
      const { body } = await s.api("GET", "/v1/plugins");
      const byName = Object.fromEntries(body.plugins.map((p: any) => [p.name, p]));
      for (const name of SEEDS) assert.equal(byName[name]?.status, "active", `${name}: ${byName[name]?.reason}`);
      assert.deepEqual(byName["sidecar-index"].capabilities, { requested: ["kv"], granted: ["kv"], ungranted: [] });
      assert.deepEqual(byName.whoami.capabilities, { requested: [], granted: [], ungranted: [] });
    });

    // Found by an outside probe: the command's KV was committed, then marking the session used
    // failed, the request answered 503 "nothing was changed" and a retry with the key ran it again.
    it("a command whose own writes committed answers 200 even if marking its session used fails; a retry replays it", async () => {
      const sid = await newSession(s);
      const trigger = `touch_fails_${sid.replace(/\W/g, "_")}`;
      await s.core.storage.client.execute(
        `create trigger ${trigger} before update of updated_at on sessions when new.id = '${sid}' begin select raise(abort, 'database is locked (test trigger)'); end`,
      );
      try {
        const send = () => s.api("POST", `/v1/sessions/${sid}/turns`, { message: "/task pay the invoice" }, { "idempotency-key": `once-${sid}` });
        const first = await send();
        assert.equal(first.status, 200, JSON.stringify(first.body));
        const again = await send();
        assert.equal(again.status, 200);
        assert.equal(again.headers.get("idempotent-replay"), "true");
        const viaEndpoint = await s.api("POST", "/v1/commands/task", { raw_args: "file the report", session_id: sid });
        assert.equal(viaEndpoint.status, 200, JSON.stringify(viaEndpoint.body));
      } finally {
        await s.core.storage.client.execute(`drop trigger ${trigger}`);
      }
      const tasks = JSON.parse((await command(s, "task", { raw_args: "" })).body.output).tasks.filter((t: any) => t.session_id === sid);
      assert.deepEqual(tasks.map((t: any) => t.title).sort(), ["file the report", "pay the invoice"]);
    });

    it("whoami reports the calling session, user and platform", async () => {
      const sid = await newSession(s, "alice", "slack");
      const res = await command(s, "whoami", { session_id: sid });
      assert.equal(res.status, 200);
      const who = JSON.parse(res.body.output);
      assert.deepEqual(who, { user_id: "alice", platform: "slack", session_id: sid, session_key: "slack:chat-alice:" });
      const stats = (await pluginInfo(s, "whoami")).stats;
      assert.ok(stats.calls >= 1 && stats.fuel_used > 0);
    });

    it("context survives a compaction: the next model call gets the conventions, once, for that turn only", async () => {
      const sid = await newSession(s);
      await seedLongHistory(s, sid);
      assert.deepEqual((await turn(s, sid, "before compaction")).injected, []);
      const compress = await s.api("POST", `/v1/sessions/${sid}/compress`, { kind: "summarize" });
      assert.equal(compress.status, 200);
      assert.equal(compress.body.compacted, true, JSON.stringify(compress.body));
      const next = await turn(s, compress.body.session_id, "after compaction");
      assert.equal(next.injected.length, 1);
      assert.equal(next.injected[0].plugin, "memory-reinject");
      assert.match(next.injected[0].context, /Project conventions/);
      const messages = await s.api("GET", `/v1/sessions/${compress.body.session_id}/messages`);
      const stored = messages.body.messages.filter((m: any) => m.role === "user").at(-1);
      assert.equal(stored.content, "after compaction", "the stored history keeps the user's own text");
      assert.deepEqual((await turn(s, compress.body.session_id, "and again")).injected, [], "re-injected once");
    });

    it("a bulk delete of 40 sessions leaves no orphan index entries", async () => {
      const keep = await newSession(s, "keeper");
      const ids: string[] = [];
      for (let i = 0; i < 40; i++) ids.push(await newSession(s, `bulk-${i}`));
      const indexed = JSON.parse((await command(s, "index", {})).body.output);
      for (const id of [keep, ...ids]) assert.ok(indexed.sessions.includes(id), `indexed ${id}`);
      const del = await s.api("POST", "/v1/sessions/bulk-delete", { ids });
      assert.equal(del.status, 200);
      assert.equal(del.body.deleted_ids.length, 40);
      const after = JSON.parse((await command(s, "index", {})).body.output);
      assert.equal(after.sessions.filter((id: string) => ids.includes(id)).length, 0);
      assert.ok(after.sessions.includes(keep));
      // What is persisted agrees with what the plugin sees.
      await s.plugins.flush();
      const rows = await s.core.storage.db.selectFrom("plugin_kv").select("key").where("plugin", "=", "sidecar-index").execute();
      const orphans = rows.filter((r) => ids.some((id) => r.key.includes(id)));
      assert.deepEqual(orphans, []);
      assert.ok(rows.some((r) => r.key.includes(keep)));
      // An archived session still exists: it stays indexed through archive and unarchive.
      assert.equal((await s.api("POST", `/v1/sessions/${keep}/archive`, {})).status, 200);
      assert.ok(JSON.parse((await command(s, "index", {})).body.output).sessions.includes(keep), "archived");
      assert.equal((await s.api("POST", `/v1/sessions/${keep}/unarchive`, {})).status, 200);
      assert.ok(JSON.parse((await command(s, "index", {})).body.output).sessions.includes(keep), "unarchived");
    });

    it("archiving a session closes its task", async () => {
      const sid = await newSession(s, "tasker");
      const opened = await command(s, "task", { session_id: sid, raw_args: "write the report" });
      assert.equal(opened.status, 200, JSON.stringify(opened.body));
      assert.match(opened.body.output, /"status":"open"/);
      assert.equal((await s.api("POST", `/v1/sessions/${sid}/archive`, {})).status, 200);
      const list = await command(s, "task", { session_id: sid });
      const mine = JSON.parse(list.body.output).tasks.filter((t: any) => t.session_id === sid);
      assert.deepEqual(
        mine.map((t: any) => [t.title, t.status]),
        [["write the report", "closed"]],
      );
    });

    it("archiving keeps the session's plugin KV: a re-injection pending before the archive still happens", async () => {
      const sid = await newSession(s);
      await seedLongHistory(s, sid);
      const compress = await s.api("POST", `/v1/sessions/${sid}/compress`, { kind: "summarize" });
      assert.equal(compress.body.compacted, true, JSON.stringify(compress.body));
      assert.equal((await s.api("POST", `/v1/sessions/${sid}/archive`, {})).body.archived, true);
      const next = await turn(s, sid, "after the archive");
      assert.deepEqual(next.injected.map((i: any) => i.plugin), ["memory-reinject"]);
    });

    it("a plugin's KV survives a restart of the runtime", async () => {
      const ops = await newSession(s, "ops");
      await command(s, "conventions", { raw_args: "Tabs, not spaces.", session_id: ops });
      await s.plugins.flush();
      await s.core.plugins.disable("memory-reinject");
      await s.core.plugins.enable("memory-reinject");
      const shown = await command(s, "conventions", { session_id: ops });
      assert.equal(JSON.parse(shown.body.output).conventions, "Tabs, not spaces.");
    });
  });
}
