// Injected context is bounded and never costs the user's history (issue 9: a 1 MiB injection made
// a turn fail with 422 after an overflow compaction had summarized the user's history away). The
// flood module (test/fixtures/hostile/flood.wat) injects 300,000 characters on every turn; `inject`
// (plugins-wasm/hostile/inject) injects a short note. Over HTTP, with the real runtime.
import { describe, it, after } from "node:test";
import assert from "node:assert/strict";
import { pluginDir, type PluginDir } from "./helpers/plugin-dir.ts";
import { newSession, pluginInfo, startPluginServer, turn, type PluginServer } from "./helpers/plugins.ts";
import { hostileModule } from "./helpers/wat-modules.ts";
import { allEvents, postStreamedTurn } from "./helpers/sse.ts";

const FLOOD = { name: "flood", version: "1.0.0", hooks: ["pre_llm_call"], commands: [], capabilities: [] };

async function server(plugins: Record<string, unknown>, config: Record<string, unknown> = {}): Promise<{ s: PluginServer; dir: PluginDir }> {
  const dir = pluginDir([], ["inject"]);
  dir.write("flood", FLOOD, hostileModule("flood"));
  const s = await startPluginServer(
    // The operator lets flood return 1 MiB: only the injection limits stand in its way.
    { dir: dir.path, enabled: ["flood", "inject"], grants: { inject: ["kv"] }, limits: { flood: { max_output_bytes: 1_048_576 } }, ...plugins },
    { config },
  );
  return { s, dir };
}

describe("injected context: an injection flood", () => {
  const open: Array<{ s: PluginServer; dir: PluginDir }> = [];
  after(async () => {
    for (const o of open) {
      await o.s.close();
      o.dir.remove();
    }
  });

  it("over plugins.max_injected_chars fails the plugin as bad_output; the other plugin's note still rides", async () => {
    const o = await server({});
    open.push(o);
    const sid = await newSession(o.s);
    const res = await turn(o.s, sid, "hello");
    assert.deepEqual(res.injected.map((i: any) => i.plugin), ["inject"]);
    assert.equal(res.compactions.length, 0);
    const info = await pluginInfo(o.s, "flood");
    assert.match(info.stats.last_error, /^bad_output: injected 299986 characters of context, over the limit of 8000 \(plugins.max_injected_chars\)/);
  });

  it("beyond the per-turn limit it is dropped and smaller injections are kept", async () => {
    const o = await server({ max_injected_chars: 1_000_000, max_injected_chars_per_turn: 2_000 });
    open.push(o);
    const sid = await newSession(o.s);
    const res = await turn(o.s, sid, "hello");
    assert.deepEqual(res.injected.map((i: any) => i.plugin), ["inject"]);
    assert.equal((await pluginInfo(o.s, "flood")).stats.last_error, null);
  });

  it("one that overflows the model's context is dropped before any of the user's history is compacted", async () => {
    const o = await server({ max_injected_chars: 1_000_000, max_injected_chars_per_turn: 1_000_000 }, { provider: { type: "local", context_window_tokens: 2_000 } });
    open.push(o);
    const sid = await newSession(o.s);
    const said = ["first words", "second words", "third words"];
    for (const message of said) {
      const res = await turn(o.s, sid, message);
      assert.equal(res.reply, `You said: ${message}`);
      assert.deepEqual(res.injected, [], "what overflowed was not sent");
      assert.deepEqual(res.compactions, []);
    }
    // Streamed, the injection is not announced either (the event came before the drop).
    const streamed = await allEvents(await postStreamedTurn(o.s.url, sid, "streamed words"));
    const answer = streamed.find((e) => e.event === "answer")!.data;
    assert.deepEqual(answer.injected, []);
    assert.deepEqual(streamed.filter((e) => e.event === "injected"), [], "no injected event for context the model never got");
    said.push("streamed words");
    const stored = (await o.s.api("GET", `/v1/sessions/${sid}/messages`)).body.messages;
    assert.deepEqual(
      stored.filter((m: any) => m.role === "user").map((m: any) => m.content),
      said,
      "every user message is still there, verbatim",
    );
  });

  it("streamed, an injection the model takes is announced before the answer's text", async () => {
    const o = await server({});
    open.push(o);
    const sid = await newSession(o.s);
    const events = await allEvents(await postStreamedTurn(o.s.url, sid, "hello"));
    const names = events.map((e) => e.event);
    assert.ok(names.indexOf("injected") > 0 && names.indexOf("injected") < names.indexOf("delta"), names.join(" "));
    assert.deepEqual(events.find((e) => e.event === "injected")!.data.injected, events.at(-1)!.data.injected);
  });
});
