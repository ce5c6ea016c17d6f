// The seed plugins' bulk on_session_delete path (more than 16 ids: one kvList instead of a host call
// per id), over HTTP with the real runtime, and a 10,000-id delivery within their fuel budget (the
// per-id path ran sidecar-index and task-tracker out of fuel on a 10k-session bulk delete).
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { TEST_DBS } from "./helpers/dialects.ts";
import { command, newSession, startPluginServer, SEED_DIR, type PluginServer } from "./helpers/plugins.ts";

const PLUGINS = ["sidecar-index", "task-tracker"];

for (const db of TEST_DBS) {
  describe(`seed plugins on bulk deletes [${db}]`, () => {
    let s: PluginServer;
    before(async () => {
      s = await startPluginServer({ dir: SEED_DIR, enabled: PLUGINS, grants: { "sidecar-index": ["kv"], "task-tracker": ["kv"] } }, { db });
    });
    after(async () => s?.close());

    /** `/task` (no title) lists every task; it is run outside any session (some are deleted). */
    const tasksOf = async (sid: string) => {
      const list = await command(s, "task", {});
      return JSON.parse(list.body.output).tasks.filter((t: any) => t.session_id === sid);
    };
    const indexed = async () => JSON.parse((await command(s, "index", {})).body.output).sessions as string[];

    it("archiving 20 sessions at once closes their tasks and no other", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push(await newSession(s, `arch-${i}`));
      const keep = await newSession(s, "keeper");
      for (const sid of [ids[0]!, ids[19]!, keep]) await command(s, "task", { session_id: sid, raw_args: `task of ${sid}` });
      const res = await s.core.deletion.remove({ reason: "archive", ids });
      assert.equal(res.deleted_ids.length, 20);
      assert.deepEqual((await tasksOf(ids[0]!)).map((t: any) => t.status), ["closed"]);
      assert.deepEqual((await tasksOf(ids[19]!)).map((t: any) => t.status), ["closed"]);
      assert.deepEqual((await tasksOf(keep)).map((t: any) => t.status), ["open"]);
    });

    it("a bulk delete of 20 sessions drops exactly their tasks and index entries", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push(await newSession(s, `del-${i}`));
      const keep = await newSession(s, "survivor");
      for (const sid of [ids[3]!, keep]) await command(s, "task", { session_id: sid, raw_args: "something" });
      const del = await s.api("POST", "/v1/sessions/bulk-delete", { ids });
      assert.equal(del.status, 200);
      assert.deepEqual(await tasksOf(ids[3]!), []);
      assert.equal((await tasksOf(keep)).length, 1);
      const left = await indexed();
      assert.ok(left.includes(keep));
      for (const id of ids) assert.ok(!left.includes(id), id);
    });

    it("a 10,000-id on_session_delete runs within the plugins' limits", async () => {
      const victim = await newSession(s, "victim");
      await command(s, "task", { session_id: victim, raw_args: "last task" });
      const deleted_ids = Array.from({ length: 9_999 }, (_, i) => `s_gone_${String(i).padStart(6, "0")}`).concat(victim);
      const report = await s.core.dispatcher.emit("on_session_delete", {
        session_id: victim,
        reason: "delete",
        profile: "default",
        deleted_ids,
        sessions_dir: s.dir,
      });
      assert.deepEqual(report.failed, []);
      for (const p of PLUGINS) assert.ok(report.delivered.includes(p), p);
      assert.deepEqual(await tasksOf(victim), []);
      assert.ok(!(await indexed()).includes(victim));
    });
  });
}
