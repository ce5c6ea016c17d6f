// Issue 10 items 5 and 7 through real HTTP and a real built WASM plugin (hostile/hookrec stores
// every payload it is given): the richer payload fields, GET /v1/hooks' JSON Schemas,
// on_session_delete one event per profile, hook_callback_timeout edge values.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { Validator } from "@cfworker/json-schema";
import { parseConfig } from "../runtime/config.ts";
import { command, HOSTILE_DIR, newSession, pluginInfo, startPluginServer, turn, type PluginServer } from "./helpers/plugins.ts";

describe("plugin API: payloads a WASM plugin receives", () => {
  let s: PluginServer;
  before(async () => {
    s = await startPluginServer({ dir: HOSTILE_DIR, enabled: ["hookrec"], grants: { hookrec: ["kv"] } });
  });
  after(() => s.close());

  const recorded = async (hook?: string): Promise<any[]> => {
    const res = await command(s, "hookrec", {});
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const all = JSON.parse(res.body.output) as any[];
    return hook ? all.filter((e) => e.hook === hook) : all;
  };

  it("carries the richer fields on session start, model calls and tool calls, each valid against GET /v1/hooks' schema", async () => {
    const parent = await newSession(s, "ana", "telegram");
    const child = (await s.api("POST", "/v1/sessions", { parent_session_id: parent, platform: "telegram", source: { user_id: "ana" } })).body.session.id;
    const first = await turn(s, child, "calculate 6*7");
    await turn(s, child, "and again");
    const hooks = (await s.api("GET", "/v1/hooks")).body.hooks as Array<{ hook: string; schema: any; returns_used: boolean }>;
    const schemaOf = (hook: string) => new Validator(hooks.find((h) => h.hook === hook)!.schema, "2020-12");

    const start = (await recorded("on_session_start")).find((e) => e.session_id === child);
    assert.equal(start.model, "local");
    const pre = (await recorded("pre_llm_call")).filter((e) => e.session_id === child);
    assert.deepEqual(
      pre.map((e) => [e.platform, e.model, e.user_id, e.parent_session_id, e.is_first_turn]),
      [["telegram", "local", "ana", parent, true], ["telegram", "local", "ana", parent, false]],
    );
    assert.equal(pre[0].turn_id, first.turn_id);
    const post = (await recorded("post_llm_call")).filter((e) => e.session_id === child);
    assert.deepEqual([post[0].user_message, post[0].model, post[0].turn_id], ["calculate 6*7", "local", first.turn_id]);
    assert.match(post[0].response, /6\*7 = 42/);
    const [preTool] = await recorded("pre_tool_call");
    assert.deepEqual([preTool.turn_id, preTool.tool_name, preTool.tool_call_id], [first.turn_id, "calculator", first.tool_calls[0].tool_call_id]);
    const [postTool] = await recorded("post_tool_call");
    assert.deepEqual([postTool.status, postTool.error, postTool.result, postTool.tool_call_id], ["ok", null, "6*7 = 42", preTool.tool_call_id]);
    assert.equal(typeof postTool.duration_ms, "number");

    const all = await recorded();
    assert.ok(all.length >= 8, `${all.length} payloads`);
    for (const e of all) {
      const res = schemaOf(e.hook).validate(e);
      if (!res.valid) assert.fail(`${e.hook}: ${JSON.stringify(res.errors.slice(0, 3))}`);
    }
    // The schemas say something: a payload missing a field fails.
    const { turn_id: _dropped, ...noTurn } = pre[0];
    assert.equal(schemaOf("pre_llm_call").validate(noTurn).valid, false);
    assert.deepEqual(
      hooks.filter((h) => h.returns_used).map((h) => h.hook).sort(),
      ["pre_llm_call", "pre_tool_call", "transform_llm_output", "transform_tool_result"],
    );
  });

  it("a delete spanning profiles fires one on_session_delete per profile, each with its own deleted_ids", async () => {
    const mk = async (profile: string, parent?: string) =>
      (await s.api("POST", "/v1/sessions", { profile, ...(parent ? { parent_session_id: parent } : {}) })).body.session.id as string;
    const home = await mk("home");
    const homeChild = await mk("home", home);
    const work = await mk("work");
    const root = (await s.api("POST", "/v1/sessions", {})).body.session.id as string;
    const before = (await recorded("on_session_delete")).length;
    const res = await s.api("POST", "/v1/sessions/bulk-delete", { ids: [work, home, root] });
    assert.deepEqual(res.body.deleted_ids, [home, homeChild, work, root].sort());
    const events = (await recorded("on_session_delete")).slice(before);
    assert.deepEqual(
      events.map((e) => [e.profile, e.session_id, e.deleted_ids]),
      [["default", root, [root]], ["home", home, [home, homeChild].sort()], ["work", work, [work]]],
    );
    // Nothing left to delete: nothing fires the second time.
    await s.api("POST", "/v1/sessions/bulk-delete", { ids: [work, home, root] });
    assert.equal((await recorded("on_session_delete")).length, before + 3);
  });
});

describe("plugin API: hook_callback_timeout edge values", () => {
  it("clamps above 600 s and falls back to the default for zero, negative or non-numeric values, with a warning", () => {
    const cases: Array<[unknown, number]> = [[1000, 600], [600, 600], [0.5, 0.5], [0, 30], [-3, 30], ["abc", 30], [null, 30], ["45", 45]];
    for (const [raw, want] of cases) {
      const c = parseConfig({ plugins: { hook_callback_timeout: raw } });
      assert.equal(c.plugins.hook_callback_timeout, want, JSON.stringify(raw));
      const warned = raw !== 600 && raw !== 0.5 && raw !== "45";
      assert.equal(c.warnings.length, warned ? 1 : 0, JSON.stringify(raw));
    }
  });

  it("a server configured with 0 starts, warns, and its plugins run under the default", async () => {
    const s = await startPluginServer({ dir: HOSTILE_DIR, enabled: ["hookrec"], grants: { hookrec: ["kv"] }, hook_callback_timeout: 0 });
    try {
      assert.equal((await s.api("GET", "/v1/plugins")).status, 200);
      assert.match(s.core.config.warnings.join("\n"), /hook_callback_timeout 0 .*default 30/);
      await newSession(s);
      assert.equal((await pluginInfo(s, "hookrec")).status, "active");
      assert.equal(JSON.parse((await command(s, "hookrec", {})).body.output).length, 1);
    } finally {
      await s.close();
    }
  });
});
