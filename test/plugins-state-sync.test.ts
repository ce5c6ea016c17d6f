// The operator's plugin state shared by every process on the database (runtime/plugins/manager.ts
// syncState, which `hookbox serve` runs every 2 s): what another process writes to plugin_state (an
// enable, a disable, a reset, a quarantine or its lifting) is applied here, also when it puts the row
// back to what it was before this process's own change, also through a reload, and a stale look at
// the rows never undoes a change this process just made.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { HOSTILE_DIR, newSession, pluginInfo, startPluginServer, SEED_DIR, type PluginServer } from "./helpers/plugins.ts";

describe("plugin state written by other processes", () => {
  let s: PluginServer;
  let sid: string;
  before(async () => {
    s = await startPluginServer({ dir: SEED_DIR, enabled: ["whoami"] });
    sid = await newSession(s, "state-sync");
  });
  after(() => s.close());

  /** What another node or the CLI does: a write to plugin_state, nothing else. */
  const elsewhere = (enabled: number | null, quarantined: string | null = null) =>
    s.core.storage.write((trx) =>
      trx
        .insertInto("plugin_state")
        .values({ name: "whoami", enabled, quarantined, updated_at: Date.now() })
        .onConflict((oc) => oc.column("name").doUpdateSet({ enabled, quarantined, updated_at: Date.now() }))
        .execute(),
    );
  const status = async () => (await pluginInfo(s, "whoami")).status as string;
  const runs = async () => (await s.api("POST", "/v1/commands/whoami", { session_id: sid })).status === 200;

  it("applies another process's disable, enable, quarantine and its lifting", async () => {
    await elsewhere(0);
    await s.plugins.syncState();
    assert.equal(await status(), "disabled");
    assert.equal(await runs(), false);
    await elsewhere(1);
    await s.plugins.syncState();
    assert.equal(await status(), "active");
    assert.equal(await runs(), true);
    await elsewhere(1, "quarantined after 5 consecutive failures; last: trap: elsewhere");
    await s.plugins.syncState();
    assert.equal(await status(), "quarantined");
    await elsewhere(1, null);
    await s.plugins.syncState();
    assert.equal(await status(), "active");
    await elsewhere(null);
    await s.plugins.syncState();
    assert.equal(await status(), "active", "reset: the config (enabled) decides");
  });

  it("a change elsewhere that puts the row back to what it was before this process's own change is applied", async () => {
    await elsewhere(0);
    await s.plugins.syncState();
    assert.equal(await status(), "disabled");
    assert.equal((await s.api("POST", "/v1/plugins/whoami/enable", {})).status, 200);
    await elsewhere(0); // another node disables it again before this one looked
    await s.plugins.syncState();
    assert.equal(await status(), "disabled");
    assert.equal(await runs(), false);
    assert.equal((await s.api("POST", "/v1/plugins/whoami/disable", {})).status, 200);
    await elsewhere(null); // reset elsewhere right after this node's disable
    await s.plugins.syncState();
    assert.equal(await status(), "active");
  });

  it("a reload applies the row as it is: a lifted quarantine and a reset included", async () => {
    await elsewhere(0, "quarantined after 5 consecutive failures; last: trap: elsewhere");
    await s.plugins.syncState();
    assert.equal(await status(), "disabled");
    await elsewhere(null, null);
    await s.plugins.refresh("whoami"); // serve --watch saw its files change before the next sync
    assert.equal(await status(), "active");
    await s.plugins.syncState();
    assert.equal(await status(), "active");
    assert.equal(await runs(), true);
  });

  it("a look at the rows taken before this process's disable does not start the plugin again", async () => {
    await elsewhere(1);
    await s.plugins.syncState();
    await elsewhere(0);
    await s.plugins.syncState();
    await elsewhere(1); // enabled elsewhere: the sync below sees it...
    const syncing = s.plugins.syncState();
    const disabled = s.plugins.disable("whoami"); // ...while this node's operator disables it
    await Promise.all([syncing, disabled]);
    assert.equal(await status(), "disabled");
    assert.equal(await runs(), false);
  });
});

// Found by an outside probe: an enable through another node or the CLI lifted a plugin-wide
// quarantine here but not a hook's own (kept only in this process), so a quarantined guard hook
// stayed off on the other nodes while the operator saw it enabled.
describe("an enable made by another process lifts this process's hook quarantines", () => {
  let s: PluginServer;
  before(async () => {
    s = await startPluginServer({ dir: HOSTILE_DIR, enabled: ["badjson"], quarantine_after: 2 });
  });
  after(() => s.close());

  it("a hook quarantined here alone is run again after an enable written elsewhere, also when the plugin was enabled before", async () => {
    // An earlier operator enable: the row already says enabled, no quarantine.
    assert.equal((await s.api("POST", "/v1/plugins/badjson/enable", {})).status, 200);
    await new Promise((r) => setTimeout(r, 5)); // the next write's updated_at differs
    const sid = await newSession(s, "hook-quarantine");
    const pre = { session_id: sid, conversation_history: [], user_message: "hi", platform: "cli", model: "m", turn_id: "t", is_first_turn: true, user_id: null, parent_session_id: null };
    const post = { session_id: sid, old_session_id: "", kind: "prune_tool_results" as const, reason: "manual" as const, before_tokens: 10, after_tokens: 5, messages_removed: 0 };
    // pre_llm_call fails twice (bad JSON), a post_compaction in between succeeds: the hook alone is quarantined.
    await s.core.dispatcher.emit("pre_llm_call", pre);
    await s.core.dispatcher.emit("post_compaction", post);
    await s.core.dispatcher.emit("pre_llm_call", pre);
    const info = await pluginInfo(s, "badjson");
    assert.equal(info.status, "active");
    assert.deepEqual(Object.keys(info.stats.quarantined_hooks), ["pre_llm_call"]);
    assert.deepEqual((await s.core.dispatcher.emit("pre_llm_call", pre)).skipped, [{ plugin: "badjson", why: "quarantined" }]);
    // What `hookbox plugins enable badjson` or another node's enable writes.
    await s.core.storage.write((trx) =>
      trx.insertInto("plugin_state").values({ name: "badjson", enabled: 1, quarantined: null, updated_at: Date.now() }).onConflict((oc) => oc.column("name").doUpdateSet({ enabled: 1, quarantined: null, updated_at: Date.now() })).execute(),
    );
    await s.plugins.syncState();
    assert.deepEqual((await pluginInfo(s, "badjson")).stats.quarantined_hooks, {});
    assert.deepEqual((await s.core.dispatcher.emit("pre_llm_call", pre)).failed.map((f) => f.plugin), ["badjson"], "called again");
  });
});

