// Issue 10 items 1, 2, 3, 4, 7 and 8 through real HTTP and real built WASM plugins: the example
// plugins text-stats (a plugin tool), tool-guard (blocks a tool call), redact (transform hooks), and
// the test plugin hostile/toolpolicy (directives, transforms and failures on cue words, an observer
// returning garbage, a hook this host does not know).
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { command, newSession, pluginInfo, startPluginServer, turn, type PluginServer } from "./helpers/plugins.ts";
import { pluginDir, type PluginDir } from "./helpers/plugin-dir.ts";
import { allEvents, postStreamedTurn } from "./helpers/sse.ts";
import { runCli } from "../runtime/cli.ts";
import { recordHooks } from "./helpers/hooks.ts";
import { callbackSubscriber, HookDispatcher } from "../hooks/dispatcher.ts";
import { ToolRegistry } from "../runtime/tools/registry.ts";
import { builtinTools } from "../runtime/tools/builtin.ts";
import { runToolCall } from "../runtime/turns/tool-step.ts";
import { PluginStateStore } from "../runtime/plugins/state.ts";

const PLUGINS = ["text-stats", "tool-guard", "redact"];
const TEST_PLUGINS = ["toolpolicy", "hookrec"];

async function server(extra: Record<string, unknown> = {}, enabled = [...PLUGINS, ...TEST_PLUGINS]) {
  const dir = pluginDir(PLUGINS, TEST_PLUGINS);
  const s = await startPluginServer({
    dir: dir.path,
    enabled,
    grants: { "tool-guard": ["kv"], toolpolicy: ["kv"], hookrec: ["kv"] },
    ...extra,
  });
  return { s, dir };
}

/** One server for a describe block: started before its tests, closed (with its folder) after. */
function serveFor(start: () => Promise<{ s: PluginServer; dir: PluginDir }>, use: (s: PluginServer) => void): void {
  let running: { s: PluginServer; dir: PluginDir } | undefined;
  before(async () => use((running = await start()).s));
  after(async () => {
    await running?.s.close();
    running?.dir.remove();
  });
}

const hookrec = async (s: PluginServer, hook: string) =>
  (JSON.parse((await command(s, "hookrec", {})).body.output) as any[]).filter((e) => e.hook === hook);

describe("plugin tools (item 1)", () => {
  let s: PluginServer;
  serveFor(() => server(), (x) => (s = x));

  it("the model sees the plugin's tool, calls it, and it runs in the sandbox with pre/post_tool_call around it", async () => {
    // Active and not called yet (text-stats has no hooks): zero stats, not null (an operator probe).
    assert.deepEqual([(await pluginInfo(s, "text-stats")).stats?.calls, (await pluginInfo(s, "text-stats")).stats?.ok], [0, 0]);
    const sid = await newSession(s);
    const t = await turn(s, sid, 'use tool text_stats {"text":"one two\\nthree"}');
    assert.equal(t.tool_calls.length, 1);
    const run = t.tool_calls[0];
    assert.deepEqual([run.tool_name, run.plugin, run.status, run.error], ["text_stats", "text-stats", "ok", null]);
    assert.deepEqual(JSON.parse(run.result), { words: 3, lines: 2, chars: 13 });
    assert.match(t.reply, /text_stats tool returned \{"words":3/);
    const [pre] = await hookrec(s, "pre_tool_call");
    const [post] = await hookrec(s, "post_tool_call");
    assert.deepEqual([pre.tool_name, pre.tool_call_id, pre.turn_id], ["text_stats", run.tool_call_id, t.turn_id]);
    assert.deepEqual([post.tool_name, post.status, post.result], ["text_stats", "ok", run.result]);
    const info = await pluginInfo(s, "text-stats");
    assert.deepEqual(info.tools.map((x: any) => x.name), ["text_stats"]);
    assert.ok(info.stats.calls >= 1 && info.stats.fuel_used > 0, "the call ran metered in the sandbox");
  });

  it("arguments are checked against the tool's JSON Schema before the plugin runs", async () => {
    const calls = ((await pluginInfo(s, "text-stats")).stats?.calls ?? 0);
    const sid = await newSession(s);
    for (const args of ['{"text":5}', "{}", '{"text":"x","extra":1}']) {
      const t = await turn(s, sid, `use tool text_stats ${args}`);
      assert.equal(t.tool_calls[0].status, "error", args);
      assert.match(t.tool_calls[0].error, /invalid arguments for text_stats/, args);
      assert.doesNotMatch(t.reply, /\.\.$/, "a result that ends its sentence gets no second period");
    }
    assert.equal(((await pluginInfo(s, "text-stats")).stats?.calls ?? 0), calls, "the plugin never ran");
  });

  it("a refusal names the first 20 issues and counts the rest (a plugin's rewrite can make thousands)", async () => {
    const sid = await newSession(s);
    const extra = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`x${i}`, i]));
    const t = await turn(s, sid, `use tool text_stats ${JSON.stringify({ text: "hi", ...extra })}`);
    const error: string = t.tool_calls[0].error;
    assert.match(error, /invalid arguments for text_stats/);
    assert.match(error, /and 180 more$/, error); // two issues per extra property
    assert.equal(error.split("; ").length, 21, error);
  });

  it("the result is size-capped", async () => {
    const { s: small, dir: d2 } = await server({ tool_result_max_bytes: 256 }, ["text-stats", "toolpolicy"]);
    try {
      const sid = await newSession(small);
      // calculator echoes its expression: a long one makes a long result.
      const t = await turn(small, sid, `use tool calculator {"expression":"${"1+".repeat(300)}1"}`);
      assert.equal(t.tool_calls[0].status, "ok");
      assert.match(t.tool_calls[0].result, /\[tool result truncated: \d+ of \d+ bytes left out\]$/);
      assert.ok(Buffer.byteLength(t.tool_calls[0].result) < 400);
      // A block's message stands in for the result: cut the same way, in the history and the answer
      // (an outside probe put 200,000 characters into both).
      const blocked = (await turn(small, sid, 'use tool text_stats {"text":"long-block-me"}')).tool_calls[0];
      assert.equal(blocked.status, "blocked");
      assert.match(blocked.result, /^B{256}\n\[tool result truncated: 1744 of 2000 bytes left out\]$/);
      assert.equal(blocked.directives[0].message, blocked.result);
      const history = (await small.api("GET", `/v1/sessions/${sid}/messages`)).body.messages;
      assert.ok(history.every((m: any) => !m.content.includes("B".repeat(300))), "no message holds the whole block");
    } finally {
      await small.close();
      d2.remove();
    }
  });

  it("a tool name never collides silently: two plugins declaring it run it for neither (no capture of the other's callers) until one is disabled", async () => {
    // Loaded first in folder order, "aaa-stats" took text-stats' callers and their arguments (an outside probe).
    const d = pluginDir(["text-stats"]);
    const manifest = JSON.parse(await (await import("node:fs/promises")).readFile(`${d.path}/text-stats/manifest.json`, "utf8"));
    const wasm = await (await import("node:fs/promises")).readFile(`${d.path}/text-stats/plugin.wasm`);
    d.write("aaa-stats", { ...manifest, name: "aaa-stats" }, wasm);
    const s2 = await startPluginServer({ dir: d.path, enabled: ["text-stats", "aaa-stats"] });
    try {
      for (const name of ["text-stats", "aaa-stats"]) assert.equal((await pluginInfo(s2, name)).status, "active", name);
      const sid = await newSession(s2);
      // Not offered to the model at all, so no call reaches either plugin.
      assert.deepEqual((await turn(s2, sid, 'use tool text_stats {"text":"secret launch code"}')).tool_calls, []);
      const logs = (await s2.api("GET", "/v1/plugins/text-stats/logs")).body.logs.map((l: { message: string }) => l.message);
      assert.ok(logs.includes("tool text_stats is claimed by plugins aaa-stats, text-stats: refused for all until the operator disables all but one"), JSON.stringify(logs));
      assert.equal((await s2.api("POST", "/v1/plugins/aaa-stats/disable")).status, 200);
      const served = (await turn(s2, sid, 'use tool text_stats {"text":"two words"}')).tool_calls[0];
      assert.equal(served?.status, "ok", JSON.stringify(served));
    } finally {
      await s2.close();
      d.remove();
    }
  });
});

describe("pre_tool_call directives (item 2) and transforms (item 3)", () => {
  let s: PluginServer;
  serveFor(() => server(), (x) => (s = x));

  it("block: the message is the tool result and the tool does not run; the directive is in the answer", async () => {
    const sid = await newSession(s);
    const calls = ((await pluginInfo(s, "text-stats")).stats?.calls ?? 0);
    const t = await turn(s, sid, 'use tool text_stats {"text":"block-me"}');
    const run = t.tool_calls[0];
    assert.deepEqual([run.status, run.result], ["blocked", "blocked by toolpolicy"]);
    assert.deepEqual(run.directives, [{ plugin: "toolpolicy", action: "block", message: "blocked by toolpolicy" }]);
    assert.equal(((await pluginInfo(s, "text-stats")).stats?.calls ?? 0), calls, "a blocked tool does not run");
    const post = (await hookrec(s, "post_tool_call")).at(-1);
    assert.deepEqual([post.status, post.result], ["blocked", "blocked by toolpolicy"]);
  });

  it("the example guard blocks a tool an operator listed, until unlisted", async () => {
    const ops = await newSession(s, "ops");
    await command(s, "guard", { session_id: ops, raw_args: "calculator" });
    const sid = await newSession(s);
    const blocked = await turn(s, sid, "calculate 1+1");
    assert.deepEqual([blocked.tool_calls[0].status, blocked.tool_calls[0].result], ["blocked", "tool calculator is blocked by tool-guard"]);
    await command(s, "guard", { session_id: ops, raw_args: "-calculator" });
    assert.equal((await turn(s, sid, "calculate 1+1")).tool_calls[0].result, "1+1 = 2");
  });

  it("modify: merged over the arguments and re-validated; block beats modify whatever the order", async () => {
    const sid = await newSession(s);
    const mod = await turn(s, sid, 'use tool calculator {"expression":"1+modify-me"}');
    const run = mod.tool_calls[0];
    assert.deepEqual([run.status, run.args.expression, run.result], ["ok", "6*7", "6*7 = 42"]);
    assert.deepEqual(run.requested_args, { expression: "1+modify-me" });
    assert.deepEqual(run.directives.map((d: any) => [d.plugin, d.action]), [["toolpolicy", "modify"]]);
    // Re-validated: a modify that breaks the schema is an error, the tool does not run.
    const bad = (await turn(s, sid, "use tool text_stats {\"text\":\"badargs-me\"}")).tool_calls[0];
    assert.equal(bad.status, "error");
    assert.match(bad.error, /invalid arguments for text_stats/);
    // tool-guard (block) sorts before toolpolicy (modify): block wins.
    const ops = await newSession(s, "ops");
    await command(s, "guard", { session_id: ops, raw_args: "calculator" });
    const both = (await turn(s, sid, 'use tool calculator {"expression":"2+modify-me"}')).tool_calls[0];
    await command(s, "guard", { session_id: ops, raw_args: "-calculator" });
    assert.deepEqual([both.status, both.result], ["blocked", "tool calculator is blocked by tool-guard"]);
    assert.deepEqual(both.directives.map((d: any) => [d.plugin, d.action]), [["tool-guard", "block"]]);
  });

  it("modify: keys named constructor, prototype or __proto__ are applied like any other key", async () => {
    const sid = await newSession(s);
    const run = (await turn(s, sid, 'use tool calculator {"expression":"1+1","constructor":"rm -rf /","note":"protokeys-me"}')).tool_calls[0];
    assert.equal(run.status, "ok", JSON.stringify(run));
    // Own data properties (JSON.parse makes them so; an object literal's __proto__ would set the prototype).
    const own = (o: object, k: string) => Object.getOwnPropertyDescriptor(o, k)?.value;
    for (const [k, want] of [["constructor", "SAFE"], ["prototype", "P"], ["__proto__", "X"], ["note", "guarded"], ["expression", "1+1"]]) {
      assert.equal(own(run.args, k!), want, `the tool ran with ${k}`);
    }
    assert.equal(own(run.directives[0].args, "constructor"), "SAFE", "the directive reported is the one applied");
    const post = (await hookrec(s, "post_tool_call")).at(-1);
    assert.equal(own(post.args, "constructor"), "SAFE", "post_tool_call sees the arguments the tool ran with");
  });

  it("a failing pre_tool_call plugin fails open by default", async () => {
    const sid = await newSession(s);
    const t = await turn(s, sid, 'use tool calculator {"expression":"3+3","note":"trap-me"}');
    assert.deepEqual([t.tool_calls[0].status, t.tool_calls[0].result], ["ok", "3+3 = 6"]);
    assert.deepEqual(t.tool_calls[0].directives, []);
  });

  it("transform_tool_result: first valid replacement in plugin name order; a failing transform changes nothing", async () => {
    const sid = await newSession(s);
    // redact (r) sorts before toolpolicy (t): both would replace; redact's wins.
    const both = (await turn(s, sid, 'use tool calculator {"expression":"1234567+1","note":"transform-me"}')).tool_calls[0];
    assert.deepEqual([both.transformed_by, both.result], ["redact", "[redacted]+1 = [redacted]"]);
    const only = (await turn(s, sid, 'use tool calculator {"expression":"1+1","note":"transform-me"}')).tool_calls[0];
    assert.deepEqual([only.transformed_by, only.result], ["toolpolicy", "transformed by toolpolicy"]);
    const failing = (await turn(s, sid, 'use tool calculator {"expression":"1+1","note":"transform-trap"}')).tool_calls[0];
    assert.deepEqual([failing.transformed_by, failing.result], [null, "1+1 = 2"], "the result is the tool's own");
    // The model saw the transformed result, and post_tool_call carries it.
    const post = (await hookrec(s, "post_tool_call")).at(-3);
    assert.match(post.result, /\[redacted\]/);
  });

  it("transform_llm_output replaces the answer before it is stored and returned", async () => {
    const sid = await newSession(s);
    const t = await turn(s, sid, "mail me at ana@example.com");
    assert.equal(t.transformed_by, "redact");
    assert.equal(t.reply, "You said: mail me at [redacted]");
    const stored = (await s.api("GET", `/v1/sessions/${sid}/messages`)).body.messages.at(-1);
    assert.equal(stored.content, "You said: mail me at [redacted]");
    const post = (await hookrec(s, "post_llm_call")).at(-1);
    assert.equal(post.response, "You said: mail me at [redacted]");
    // Streamed: no delta can leak what the transform replaces; the answer event carries it.
    const events = await allEvents(await postStreamedTurn(s.url, sid, "again ana@example.com"));
    assert.deepEqual(events.filter((e) => e.event === "delta"), []);
    assert.equal(events.at(-1)!.data.reply, "You said: again [redacted]");
  });

  // A quarantined transform plugin is not called: it must not keep every session's answer from streaming.
  it("the answer streams again while every transform_llm_output plugin is quarantined", async () => {
    const sid = await newSession(s);
    const transforms = s.core.dispatcher.subscribersOf("transform_llm_output");
    assert.ok(transforms.length > 0);
    for (const name of transforms) s.core.dispatcher.quarantine(name, "test: quarantined");
    try {
      const events = await allEvents(await postStreamedTurn(s.url, sid, "stream me, ana@example.com"));
      assert.ok(events.filter((e) => e.event === "delta").length > 0, JSON.stringify(events.map((e) => e.event)));
      assert.equal(events.at(-1)!.data.reply, "You said: stream me, ana@example.com");
    } finally {
      for (const name of transforms) s.core.dispatcher.release(name);
    }
  });

  // Offered, every call of them failed as "quarantined" (an outside probe); its prompt section was withdrawn already.
  it("a quarantined plugin's tools are not offered to the model until it is enabled again", async () => {
    const sid = await newSession(s);
    s.core.dispatcher.quarantine("text-stats", "test: quarantined");
    try {
      const t = await turn(s, sid, 'use tool text_stats {"text":"a b"}');
      assert.deepEqual([t.tool_calls.length, t.reply], [0, 'You said: use tool text_stats {"text":"a b"}']);
    } finally {
      s.core.dispatcher.release("text-stats");
    }
    assert.equal((await turn(s, sid, 'use tool text_stats {"text":"a b"}')).tool_calls[0].status, "ok");
  });

  it("redact masks a long answer at its shipped limits: quotes, backslashes, newlines and non-ASCII kept (an outside probe: 2,500 characters ran it out of memory)", async () => {
    const sid = await newSession(s);
    const line = (k: number, masked: boolean) =>
      `line ${k}: "quoted" \\ back ${masked ? "[redacted]" : "ana.b+x@example.com"} tel ${masked ? "[redacted]" : "0123456789"} ok 12345 café 🙂\n`;
    const lines = (masked: boolean) => Array.from({ length: 400 }, (_, k) => line(k, masked)).join("");
    assert.ok(lines(false).length > 30_000);
    const t = await turn(s, sid, lines(false));
    assert.equal(t.transformed_by, "redact");
    assert.equal(t.reply, `You said: ${lines(true)}`);
    assert.equal((await pluginInfo(s, "redact")).stats.failures.memory, 0);
  });

  it("a transformed text holding a NUL is returned as it is stored: the NUL becomes U+FFFD, nothing after it is lost", async () => {
    // The embedded file's driver reads a text up to its first NUL: the history read back "kept".
    const sid = await newSession(s);
    const tool = await turn(s, sid, 'use tool calculator {"expression":"1+1","note":"nul-me"}');
    assert.equal(tool.tool_calls[0].result, "tool\uFFFDresult");
    const t = await turn(s, sid, "nul-me");
    assert.equal(t.reply, "kept\uFFFDafter the NUL");
    const stored = (await s.api("GET", `/v1/sessions/${sid}/messages`)).body.messages;
    assert.deepEqual(stored.filter((m: any) => m.role === "tool").map((m: any) => m.content), ["tool\uFFFDresult"]);
    assert.equal(stored.at(-1).content, "kept\uFFFDafter the NUL");
  });

  it("a replacement answer longer than 100,000 characters (and than the answer) is not taken; hooks see long history messages cut", async () => {
    const sid = await newSession(s);
    const t = await turn(s, sid, "long-me");
    assert.deepEqual([t.transformed_by, t.reply], [null, "You said: long-me"]);
    // Every pre_llm_call subscriber holds the history: each message is cut to 8,000 characters there.
    await turn(s, sid, `long ${"w".repeat(20_000)}`);
    const rec = recordHooks(s.core.dispatcher, { name: "history-probe", hooks: ["pre_llm_call"] });
    await turn(s, sid, "next");
    s.core.dispatcher.unsubscribe("history-probe");
    const cut = rec.of("pre_llm_call")[0]!.conversation_history.find((m) => m.content.startsWith("long "))!;
    assert.equal(cut.content, `long ${"w".repeat(7_995)}\n[cut for hooks: 12005 of 20005 characters left out]`);
    const stored = (await s.api("GET", `/v1/sessions/${sid}/messages`)).body.messages;
    assert.ok(stored.some((m: { content: string }) => m.content === `long ${"w".repeat(20_000)}`), "stored whole");
  });
});

describe("fail-closed pre_tool_call plugins (item 2)", () => {
  it("a plugin the operator marks fail-closed blocks the call when it fails", async () => {
    const { s, dir } = await server({ fail_closed: ["toolpolicy"] });
    try {
      const sid = await newSession(s);
      const t = await turn(s, sid, 'use tool calculator {"expression":"3+3","note":"trap-me"}');
      const run = t.tool_calls[0];
      assert.equal(run.status, "blocked");
      assert.match(run.result, /^blocked: toolpolicy \(fail-closed\) did not answer: trap/);
      assert.deepEqual(run.directives.map((d: any) => [d.plugin, d.action]), [["toolpolicy", "fail_closed"]]);
      assert.equal((await turn(s, sid, "calculate 3+3")).tool_calls[0].result, "3+3 = 6", "an answer that works allows again");
    } finally {
      await s.close();
      dir.remove();
    }
  });

  // A plugin with no pre_tool_call has no say over tool calls: marking it fail-closed protects nothing.
  it("a fail-closed plugin without pre_tool_call is warned of in its logs; a guard with it is not", async () => {
    const { s, dir } = await server({ fail_closed: ["text-stats", "toolpolicy"] });
    try {
      const logs = async (name: string) => (await s.api("GET", `/v1/plugins/${name}/logs`)).body.logs.map((l: { level: string; message: string }) => [l.level, l.message]);
      assert.deepEqual((await logs("text-stats")).filter(([, m]: string[]) => /fail_closed/.test(m!)), [
        ["warn", "plugins.fail_closed names it, but its manifest has no pre_tool_call hook: while it runs it has no say over tool calls (not running, it blocks them, as any fail-closed plugin)"],
      ]);
      assert.deepEqual((await logs("toolpolicy")).filter(([, m]: string[]) => /fail_closed/.test(m!)), []);
    } finally {
      await s.close();
      dir.remove();
    }
  });
});

// Found by an outside hostile-plugin probe: a plugin steering the model into its own tool that never
// returns held every turn for the tool's time limit, and never cooled off (tool calls do not count
// towards a quarantine: their arguments are the caller's).
describe("a plugin tool that times out cools off", () => {
  it("is not offered nor run for the cool-off; an operator's enable lifts it", async () => {
    const dir = pluginDir([], ["spintool"]);
    const s = await startPluginServer({ dir: dir.path, enabled: ["spintool"], limits: { spintool: { fuel: 1e13, timeout_seconds: 1 } } });
    try {
      const sid = await newSession(s);
      const first = await turn(s, sid, "hello");
      assert.deepEqual(first.tool_calls.map((c: any) => [c.tool_name, c.status]), [["spin", "error"]]);
      assert.match(first.tool_calls[0].error, /^failed \(timeout\)/);
      const next = await turn(s, sid, "hello again");
      assert.deepEqual(next.tool_calls, [], "not offered while it cools off");
      assert.equal((await pluginInfo(s, "spintool")).status, "active", "no quarantine: a tool's input is its caller's");
      await s.plugins.enable("spintool");
      assert.equal((await turn(s, sid, "and again")).tool_calls[0]?.tool_name, "spin", "offered again");
    } finally {
      await s.close();
      dir.remove();
    }
  });
});

// Found by an outside probe of the plugin lifecycle: between a reload's (or an enable's) stop and
// start, a fail-closed guard counted as "active", so it had no opinion and tool calls it blocks ran;
// its commands answered 404 unknown_command; and an enable ran a new module under the manifest read
// before it was stopped.
describe("a plugin between its stop and its start (outside probe)", () => {
  /** Holds `name`'s reload between its stop and its start until the returned function is called. */
  function holdReload(s: PluginServer, name: string): { reloading: Promise<unknown>; release: () => void } {
    const state = (s.plugins as unknown as { state: { load: () => Promise<unknown> } }).state;
    const load = state.load.bind(state);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    state.load = async () => {
      await gate;
      state.load = load;
      return load();
    };
    return { reloading: s.plugins.refresh(name), release };
  }

  const settle = (p: Promise<unknown>) => Promise.race([p.then(() => "done"), new Promise((r) => setTimeout(() => r("pending"), 300))]);

  it("a tool call waits for a fail-closed guard that is reloading, and is blocked when it does not start in time; its commands answer 503 plugin_unavailable", async () => {
    const { s, dir } = await server({ fail_closed: ["tool-guard"] });
    try {
      const sid = await newSession(s);
      const held = holdReload(s, "tool-guard");
      while (s.plugins.running("tool-guard")) await new Promise((r) => setTimeout(r, 1));
      assert.equal((await pluginInfo(s, "tool-guard")).status, "active", "wanted and not failed: it is only starting");
      // Still not started after the wait (3 s): judged without it, the call is blocked.
      const late = (await turn(s, sid, "calculate 2+2")).tool_calls[0];
      assert.deepEqual([late.status, late.result], ["blocked", "blocked: tool-guard (fail-closed) did not answer: not running (starting)"]);
      const cmd = await command(s, "guard", { session_id: sid, raw_args: "" });
      assert.deepEqual([cmd.status, cmd.body.error.code], [503, "plugin_unavailable"]);
      assert.match(cmd.body.error.message, /\/guard is a command of plugin tool-guard, which is starting \(being loaded; retry in a moment\)/);
      // Started while the call waits: the restarted guard judges it (and lets it run).
      const waiting = turn(s, sid, "calculate 2+2");
      assert.equal(await settle(waiting), "pending", "the call waits for the guard");
      held.release();
      await held.reloading;
      const run = (await waiting).tool_calls[0];
      assert.deepEqual([run.status, run.result], ["ok", "2+2 = 4"]);
      assert.equal((await command(s, "guard", { session_id: sid, raw_args: "" })).status, 200);
    } finally {
      await s.close();
      dir.remove();
    }
  });

  // Found by an outside probe: a plugin tool called while its plugin reloaded was an "unknown tool".
  it("a plugin tool called while its plugin reloads runs once it has started; a disabled plugin's tool says so", async () => {
    const { s, dir } = await server();
    try {
      const sid = await newSession(s);
      // The reload starts after the model was offered the tool and called it, before it runs.
      let held: ReturnType<typeof holdReload> | undefined;
      let disable = false;
      s.core.dispatcher.subscribe(callbackSubscriber("aaa-reloader", ["pre_tool_call"], async () => {
        if (disable) await s.plugins.disable("text-stats");
        if (held) return null;
        held = holdReload(s, "text-stats");
        while (s.plugins.running("text-stats")) await new Promise((r) => setTimeout(r, 1));
        return null;
      }));
      const waiting = turn(s, sid, 'use tool text_stats {"text":"one two"}');
      assert.equal(await settle(waiting), "pending", "the call waits for the plugin");
      assert.ok(held && !s.plugins.running("text-stats"), "it is reloading");
      held.release();
      await held.reloading;
      const run = (await waiting).tool_calls[0];
      assert.deepEqual([run.status, run.plugin, JSON.parse(run.result)], ["ok", "text-stats", { words: 2, lines: 1, chars: 7 }]);
      disable = true; // now it is disabled meanwhile: its tool is not "unknown" either
      const off = (await turn(s, sid, 'use tool text_stats {"text":"one two"}')).tool_calls[0];
      assert.deepEqual([off.status, off.error], ["error", "tool text_stats is a tool of plugin text-stats, which is disabled (disabled by operator)"]);
    } finally {
      await s.close();
      dir.remove();
    }
  });

  // Found by a review: the guard's reload ended while the emit awaited another plugin, so it was
  // subscribed when the call was judged but had never been asked.
  it("a fail-closed guard (re)started while the call was judged, never asked, blocks it", async () => {
    const dispatcher = new HookDispatcher();
    const guard = callbackSubscriber("guard", ["pre_tool_call"], () => ({ action: "block", message: "no" }));
    dispatcher.subscribe(callbackSubscriber("audit", ["pre_tool_call"], async () => {
      dispatcher.subscribe(guard); // the guard's activation completes meanwhile
      return null;
    }));
    const plugins = { running: () => true, get: () => ({ status: "active", hooks: ["pre_tool_call"] }) as never, settled: async () => {} };
    const deps = { dispatcher, tools: new ToolRegistry(builtinTools(Date.now)), maxResultBytes: 16_384, failClosed: new Set(["guard"]), plugins };
    const run = await runToolCall(deps, { session_id: "s1", turn_id: "t1", tool_call_id: "c1", tool_name: "calculator", args: { expression: "1+1" } });
    assert.deepEqual([run.status, run.result], ["blocked", "blocked: guard (fail-closed) did not answer: not asked: it was (re)started while the call was judged"]);
    // Asked the next time, it answers for itself.
    const next = await runToolCall(deps, { session_id: "s1", turn_id: "t1", tool_call_id: "c2", tool_name: "calculator", args: { expression: "1+1" } });
    assert.deepEqual([next.status, next.result], ["blocked", "no"]);
  });

  it("an enable, here or by another process, reads the manifest again with the module it starts", async () => {
    const { s, dir } = await server();
    try {
      const path = join(dir.path, "text-stats", "manifest.json");
      const manifest = JSON.parse(readFileSync(path, "utf8"));
      assert.equal((await s.api("POST", "/v1/plugins/text-stats/disable", {})).status, 200);
      writeFileSync(path, JSON.stringify({ ...manifest, version: "2.0.0", tools: [] }));
      assert.equal((await s.api("POST", "/v1/plugins/text-stats/enable", {})).status, 200);
      assert.deepEqual([(await pluginInfo(s, "text-stats")).version, (await pluginInfo(s, "text-stats")).tools], ["2.0.0", []]);
      const t = await turn(s, await newSession(s), 'use tool text_stats {"text":"a b"}');
      assert.deepEqual(t.tool_calls, [], "the tool the new manifest dropped is not offered");

      assert.equal((await s.api("POST", "/v1/plugins/text-stats/disable", {})).status, 200);
      writeFileSync(path, JSON.stringify({ ...manifest, version: "3.0.0" }));
      await new PluginStateStore(s.core.storage, Date.now).save("text-stats", { enabled: 1, quarantined: null });
      await s.plugins.syncState();
      assert.deepEqual([(await pluginInfo(s, "text-stats")).status, (await pluginInfo(s, "text-stats")).version], ["active", "3.0.0"]);
    } finally {
      await s.close();
      dir.remove();
    }
  });
});

describe("guards see what will run (outside probe)", () => {
  // A fail-closed guard whose module broke (a failed rebuild) loaded as "failed" and blocked nothing.
  it("a fail-closed guard that is not running blocks every tool call, saying why", async () => {
    const { s, dir } = await server({ fail_closed: ["tool-guard"] });
    await s.close();
    writeFileSync(join(dir.path, "tool-guard", "plugin.wasm"), Buffer.from("\0asm\x01\0\0\0broken"));
    const again = await startPluginServer({ dir: dir.path, enabled: [...PLUGINS, ...TEST_PLUGINS], grants: { "tool-guard": ["kv"] }, fail_closed: ["tool-guard"] });
    try {
      assert.equal((await pluginInfo(again, "tool-guard")).status, "failed");
      const run = (await turn(again, await newSession(again), "calculate 2+2")).tool_calls[0];
      assert.equal(run.status, "blocked");
      assert.match(run.result, /^blocked: tool-guard \(fail-closed\) did not answer: not running \(failed\)/);
    } finally {
      await again.close();
      dir.remove();
    }
  });

  // A squatter declaring another plugin's tool and command took them over (callers, arguments and
  // identity) once that plugin's module broke.
  it("a tool or command a plugin that failed to load declares runs for no other plugin declaring it", async () => {
    const dir = pluginDir(["text-stats", "tool-guard"]);
    for (const [from, to] of [["text-stats", "squat-stats"], ["tool-guard", "squat-guard"]]) {
      const manifest = JSON.parse(readFileSync(join(dir.path, from!, "manifest.json"), "utf8"));
      dir.write(to!, { ...manifest, name: to, hooks: [] }, readFileSync(join(dir.path, from!, "plugin.wasm")));
      writeFileSync(join(dir.path, from!, "plugin.wasm"), Buffer.from("\0asm\x01\0\0\0broken"));
    }
    const s = await startPluginServer({ dir: dir.path, enabled: ["text-stats", "tool-guard", "squat-stats", "squat-guard"], grants: { "squat-guard": ["kv"], "tool-guard": ["kv"] } });
    try {
      assert.deepEqual([(await pluginInfo(s, "text-stats")).status, (await pluginInfo(s, "squat-stats")).status], ["failed", "active"]);
      const sid = await newSession(s, "ops");
      const t = await turn(s, sid, 'use tool text_stats {"text":"a b"}');
      assert.equal(t.tool_calls.length, 0, "not offered to the model");
      const guard = await command(s, "guard", { session_id: sid, raw_args: "calculator" });
      assert.equal(guard.status, 403);
      assert.match(guard.body.error.message, /\/guard is claimed by plugins squat-guard and tool-guard \(failed\); it runs for neither/);
      // Listed as the call answers it: refused, with both claimants (an outside probe saw it listed as live).
      const listed = (await s.api("GET", "/v1/commands")).body.commands.find((c: { name: string }) => c.name === "guard");
      assert.deepEqual([listed.plugin, listed.conflict, listed.description], [null, ["squat-guard", "tool-guard"], "refused: claimed by plugins squat-guard, tool-guard (failed)"]);
      // The operator settles it by disabling all but one (the broken one here): the other runs.
      for (const broken of ["tool-guard", "text-stats"]) assert.equal((await s.api("POST", `/v1/plugins/${broken}/disable`, {})).status, 200);
      assert.equal((await command(s, "guard", { session_id: sid, raw_args: "calculator" })).status, 200);
      const settled = (await s.api("GET", "/v1/commands")).body.commands.find((c: { name: string }) => c.name === "guard");
      assert.deepEqual([settled.plugin, settled.conflict], ["squat-guard", undefined]);
      assert.equal((await turn(s, sid, 'use tool text_stats {"text":"a b"}')).tool_calls[0].plugin, "squat-stats");
    } finally {
      await s.close();
      dir.remove();
    }
  });

  // Each plugin saw the model's arguments: a modify (of any plugin, in any name order) slipped past the guards.
  it("arguments a modify changed are delivered again: a block of the final ones blocks the call", async () => {
    const { s, dir } = await server({}, ["toolpolicy", "text-stats", "hookrec"]);
    try {
      const sid = await newSession(s);
      const run = (await turn(s, sid, 'use tool text_stats {"text":"smuggle-me"}')).tool_calls[0];
      assert.deepEqual([run.status, run.result], ["blocked", "blocked by toolpolicy"]);
      assert.deepEqual(run.directives.map((d: any) => [d.plugin, d.action]), [["toolpolicy", "modify"], ["toolpolicy", "block"]]);
      const pre = await hookrec(s, "pre_tool_call");
      assert.deepEqual(pre.map((e: any) => e.args.text), ["smuggle-me", "now block-me"]);
      // A modify whose result no plugin blocks runs as before (one more delivery, nothing else).
      const ok = (await turn(s, sid, 'use tool calculator {"expression":"1+modify-me"}')).tool_calls[0];
      assert.deepEqual([ok.status, ok.result], ["ok", "6*7 = 42"]);
    } finally {
      await s.close();
      dir.remove();
    }
  });
});

describe("arguments no tool takes", () => {
  // 3 MB of model arguments ran a guard out of memory five times, quarantined it, and the tools it blocked ran.
  it("are refused before any pre_tool_call plugin gets them; post_tool_call still hears of the call", async () => {
    const dispatcher = new HookDispatcher();
    const rec = recordHooks(dispatcher, { hooks: ["pre_tool_call", "post_tool_call"] });
    const deps = { dispatcher, tools: new ToolRegistry(builtinTools(Date.now)), maxResultBytes: 16_384, failClosed: new Set<string>() };
    const call = { session_id: "s1", turn_id: "t1", tool_call_id: "c1", tool_name: "calculator" };
    const run = await runToolCall(deps, { ...call, args: { expression: "1+1", pad: "x".repeat(1_100_000) } });
    assert.deepEqual([run.status, run.error], ["error", "invalid arguments for calculator: the arguments hold more than 1,048,576 characters of text and names: too large to check"]);
    assert.deepEqual(rec.events.map((e) => [e.hook, (e as any).args]), [["post_tool_call", {}]], "no plugin gets them, later hooks neither");
    // Values without text count too: a million zeros.
    const zeros = await runToolCall(deps, { ...call, args: { expression: "1+1", list: new Array(1_000_000).fill(0) } });
    assert.equal(zeros.error, "invalid arguments for calculator: the arguments hold more than 100,000 values: too large to check");
    assert.equal((await runToolCall(deps, { ...call, args: { expression: "1+1" } })).result, "1+1 = 2");
  });

  // Storage turns a lone surrogate into U+FFFD: the answer had "\ud800" while the history had U+FFFD.
  it("a tool result holding a lone surrogate or a NUL is the same text in the answer, the hooks and the history", async () => {
    const dispatcher = new HookDispatcher();
    const rec = recordHooks(dispatcher, { hooks: ["post_tool_call"] });
    const odd = { spec: { name: "odd", description: "returns text storage would change", parameters: { type: "object" } }, run: () => "X\ud800Y\u0000Z \ud83d\ude00" };
    const deps = { dispatcher, tools: new ToolRegistry([odd]), maxResultBytes: 16_384, failClosed: new Set<string>() };
    const run = await runToolCall(deps, { session_id: "s1", turn_id: "t1", tool_call_id: "c1", tool_name: "odd", args: {} });
    assert.equal(run.result, "X\uFFFDY\uFFFDZ \u{1F600}");
    assert.equal((rec.of("post_tool_call")[0] as any).result, run.result);
  });
});

describe("semantics made exact (item 7)", () => {
  let s: PluginServer;
  serveFor(() => server({ quarantine_after: 2 }, ["toolpolicy", "text-stats"]), (x) => (s = x));

  it("an observer's garbage output is not a failure and keeps its KV writes", async () => {
    const sid = await newSession(s);
    await turn(s, sid, "calculate 1+1");
    await turn(s, sid, "calculate 2+2");
    const info = await pluginInfo(s, "toolpolicy");
    assert.equal(info.stats.failures.bad_output, 0);
    assert.equal(JSON.parse((await command(s, "policy", {})).body.output).post_seen, 2);
  });

  it("a hook this host does not know loads with a warning; its other hooks work", async () => {
    const info = await pluginInfo(s, "toolpolicy");
    assert.equal(info.status, "active");
    assert.deepEqual(info.unknown_hooks, ["on_gateway_restart"]);
    assert.deepEqual(info.unknown_fields, ["homepage"], "an unknown manifest key is reported, and ignored");
    assert.ok(!info.hooks.includes("on_gateway_restart"));
    assert.ok(info.hooks.includes("pre_tool_call"));
  });

  it("quarantine is per hook: a hook failing again and again is skipped alone, shown in plugins list; the others go on", async () => {
    const sid = await newSession(s);
    const before = JSON.parse((await command(s, "policy", {})).body.output).post_seen;
    for (const n of [1, 2, 3]) await turn(s, sid, `use tool calculator {"expression":"${n}+0","note":"trap-me"}`);
    const info = await pluginInfo(s, "toolpolicy");
    assert.equal(info.status, "active", "the plugin is not silenced");
    assert.equal(info.stats.failing_hook, "pre_tool_call");
    assert.deepEqual(Object.keys(info.stats.quarantined_hooks), ["pre_tool_call"]);
    assert.match(info.stats.quarantined_hooks.pre_tool_call, /hook pre_tool_call quarantined after 2 consecutive failures; last: trap/);
    assert.equal(info.stats.failures.trap, 2, "the third turn skipped the quarantined hook");
    // post_tool_call kept running on every call.
    assert.equal(JSON.parse((await command(s, "policy", {})).body.output).post_seen, before + 3);
    const listed = (await s.api("GET", "/v1/plugins")).body.plugins.find((p: any) => p.name === "toolpolicy");
    assert.ok(listed.stats.quarantined_hooks.pre_tool_call);
    const out: string[] = [];
    assert.equal(await runCli(["plugins", "list"], { out: (l: string) => out.push(l), err: (l: string) => out.push(l) }, { core: s.core }), 0);
    const line = out.find((l) => l.startsWith("toolpolicy"))!;
    assert.match(line, /hook pre_tool_call quarantined: .*failing hook: pre_tool_call.*unknown hooks \(ignored\): on_gateway_restart/);
    // An operator enable lifts it.
    await s.api("POST", "/v1/plugins/toolpolicy/enable", {});
    assert.deepEqual((await pluginInfo(s, "toolpolicy")).stats.quarantined_hooks, {});
  });
});
