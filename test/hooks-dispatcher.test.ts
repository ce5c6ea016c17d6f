// What the dispatcher counts for each plugin (GET /v1/plugins stats, the call metrics): a call's
// latency is its own, not the bookkeeping of the plugin before it (a failure's log line, the call
// observers; only the last steps a sandbox takes after the end it reports, with nothing to commit,
// fall into the next call's span), and a refused output is one failed call, not a success and a
// failure. The clock (performance.now) is a fake one the test moves, so the figures are exact.
import { afterEach, beforeEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { callbackSubscriber, HookDispatcher, type CallEvent } from "../hooks/dispatcher.ts";
import { PluginCallError } from "../hooks/failures.ts";
import type { HookFields } from "../hooks/catalogue.ts";

const event: HookFields<"pre_llm_call"> = {
  session_id: "s1",
  conversation_history: [],
  user_message: "hi",
  platform: "test",
  model: "m",
  turn_id: "t1",
  is_first_turn: true,
  user_id: null,
  parent_session_id: null,
};

describe("hooks: dispatcher bookkeeping", () => {
  let now = 0;
  const realNow = performance.now;
  beforeEach(() => {
    now = 0;
    performance.now = () => now;
  });
  afterEach(() => {
    performance.now = realNow;
  });

  it("times each call alone: a failure's log and the observers before it are not the next plugin's latency", async () => {
    const d = new HookDispatcher({ log: () => void (now += 30) });
    const seen: CallEvent[] = [];
    d.onCall((e) => {
      seen.push(e);
      now += 15;
    });
    const work = (ms: number, fail = false) => () => {
      now += ms;
      if (fail) throw new Error("boom");
      return undefined;
    };
    d.subscribe(callbackSubscriber("a-fails", ["pre_llm_call"], work(1, true)));
    d.subscribe(callbackSubscriber("b-quick", ["pre_llm_call"], work(2)));
    d.subscribe(callbackSubscriber("c-quick", ["pre_llm_call"], work(3)));
    await d.emit("pre_llm_call", event);
    assert.deepEqual(
      seen.map((e) => [e.plugin, e.ms, e.failure ?? null]),
      [["a-fails", 1, "trap"], ["b-quick", 2, null], ["c-quick", 3, null]],
    );
    assert.equal(d.stats("b-quick")!.latency_ms.p50, 2);
    assert.equal(d.stats("c-quick")!.latency_ms.p50, 3);
  });

  // A sandbox's synchronous call reads the clock once, at its end, and reports it (endedMono): the
  // dispatcher times the call to it and starts the next call there, with no read of its own.
  it("times a call that reports its end to that end, and hands the next call its start", async () => {
    const d = new HookDispatcher();
    const starts: number[] = [];
    const sub = (name: string, ms: number, reportsEnd: boolean) => ({
      name,
      hooks: new Set(["pre_llm_call" as const]),
      call: (dl: { startedMono: number }) => {
        starts.push(dl.startedMono);
        now += ms;
        const ended = now;
        now += 1; // steps after the reading (lock passed on, nothing to commit): timed with the next call
        return reportsEnd ? { endedMono: ended, checked: true } : {};
      },
    });
    d.subscribe(sub("a-reports", 4, true));
    d.subscribe(sub("b-reports", 2, true));
    d.subscribe(sub("c-reads", 3, false));
    await d.emit("pre_llm_call", event);
    assert.deepEqual(starts, [0, 4, 7]);
    assert.deepEqual(["a-reports", "b-reports", "c-reads"].map((p) => d.stats(p)!.latency_ms.p50), [4, 3, 5]);
  });

  // Sandboxes check deadlines against the real clock: an injected `now` (tests, replays) moves the
  // cool-offs, not the deadlines handed to the calls.
  it("hands calls deadlines on the real clock whatever its own clock says", async () => {
    const d = new HookDispatcher({ now: () => 1_000, timeoutMs: 2_000 });
    const seen: Array<{ deadline: number; startedAt: number }> = [];
    d.subscribe({ name: "p", hooks: new Set(["pre_llm_call" as const]), call: (dl) => (seen.push({ deadline: dl.deadline, startedAt: dl.startedAt }), {}) });
    const before = Date.now();
    await d.emit("pre_llm_call", event);
    const [{ deadline, startedAt }] = seen as [{ deadline: number; startedAt: number }];
    assert.ok(startedAt >= before - 1 && startedAt <= Date.now() + 1, `started at ${startedAt}, real clock ${before}`);
    assert.equal(deadline - startedAt, 2_000);
  });

  it("refuses an output nested deeper than 64 levels as bad_output; brackets inside strings do not count", async () => {
    const d = new HookDispatcher();
    const deep = '{"action":"modify","args":{"expression":' + "[".repeat(20_000) + "]".repeat(20_000) + "}}";
    const flat = JSON.stringify({ action: "modify", args: { expression: "[".repeat(500) + "{".repeat(500) } });
    const raw = (name: string, text: string) => ({ name, hooks: new Set(["pre_tool_call" as const]), call: () => ({ output: text }) });
    d.subscribe(raw("deep", deep));
    d.subscribe(raw("flat", flat));
    const report = await d.emit("pre_tool_call", { session_id: "s1", tool_name: "calculator", args: { expression: "1+1" }, task_id: "t1", tool_call_id: "c1" } as never);
    assert.deepEqual(report.failed.map((f) => [f.plugin, f.kind, f.message]), [["deep", "bad_output", "output nests deeper than 64 levels"]]);
    assert.deepEqual(report.delivered, ["flat"]);
  });

  it("refuses a modify whose arguments pass 64 KiB of JSON as bad_output, whatever the plugin's own output limit", async () => {
    const d = new HookDispatcher({ maxOutputBytes: 4 * 1024 * 1024 });
    const raw = (name: string, text: string) => ({ name, hooks: new Set(["pre_tool_call" as const]), call: () => ({ output: text }) });
    const modify = (chars: number) => JSON.stringify({ action: "modify", args: { expression: "x".repeat(chars) } });
    d.subscribe(raw("huge", modify(1024 * 1024)));
    d.subscribe(raw("within", modify(60_000)));
    const report = await d.emit("pre_tool_call", { session_id: "s1", tool_name: "calculator", args: { expression: "1+1" }, task_id: "t1", tool_call_id: "c1" } as never);
    assert.deepEqual(report.failed.map((f) => [f.plugin, f.kind]), [["huge", "bad_output"]]);
    assert.match(report.failed[0]!.message, /args may hold at most 65536 characters of JSON/);
    assert.deepEqual(report.delivered, ["within"]);
  });

  // Found by an outside probe: [1, 2] as args was merged into the call's arguments as {"0":1,"1":2}.
  it("refuses a modify whose args are an array, not an object, as bad_output", async () => {
    const d = new HookDispatcher();
    const raw = (name: string, text: string) => ({ name, hooks: new Set(["pre_tool_call" as const]), call: () => ({ output: text }) });
    d.subscribe(raw("array", JSON.stringify({ action: "modify", args: [1, 2] })));
    d.subscribe(raw("object", JSON.stringify({ action: "modify", args: { expression: "2+2" } })));
    const report = await d.emit("pre_tool_call", { session_id: "s1", tool_name: "calculator", args: { expression: "1+1" }, task_id: "t1", tool_call_id: "c1" } as never);
    assert.deepEqual(report.failed.map((f) => [f.plugin, f.kind]), [["array", "bad_output"]]);
    assert.match(report.failed[0]!.message, /args must be a JSON object, not an array/);
    assert.deepEqual(report.delivered, ["object"]);
  });

  // Found by a plugin-API probe: {"response": ...} from transform_tool_result (or {"result": ...} from
  // transform_llm_output) passed the check and was then taken as "nothing", without a word.
  it("refuses a transform's output holding the other transform's key as bad_output", async () => {
    const d = new HookDispatcher();
    const raw = (name: string, hook: "transform_tool_result" | "transform_llm_output", text: string) => ({ name, hooks: new Set([hook]), call: () => ({ output: text }) });
    d.subscribe(raw("wrong-tool", "transform_tool_result", '{"response":"x"}'));
    d.subscribe(raw("right-tool", "transform_tool_result", '{"result":"x"}'));
    d.subscribe(raw("wrong-llm", "transform_llm_output", '{"result":"x"}'));
    d.subscribe(raw("right-llm", "transform_llm_output", '{"response":"x"}'));
    const tool = await d.emit("transform_tool_result", { session_id: "s1", turn_id: "t1", tool_call_id: "c1", tool_name: "calculator", args: {}, result: "2", status: "ok" } as never);
    assert.deepEqual(tool.failed.map((f) => [f.plugin, f.kind, f.message]), [["wrong-tool", "bad_output", 'transform_tool_result output must be a string or {"result": string}']]);
    assert.deepEqual(tool.results, [{ plugin: "right-tool", value: { result: "x" } }]);
    const llm = await d.emit("transform_llm_output", { session_id: "s1", turn_id: "t1", response: "r" });
    assert.deepEqual(llm.failed.map((f) => [f.plugin, f.kind, f.message]), [["wrong-llm", "bad_output", 'transform_llm_output output must be a string or {"response": string}']]);
    assert.deepEqual(llm.results, [{ plugin: "right-llm", value: { response: "x" } }]);
  });

  it("counts a refused output once, as a failed call", async () => {
    const d = new HookDispatcher();
    const seen: CallEvent[] = [];
    d.onCall((e) => seen.push(e));
    d.subscribe(callbackSubscriber("bad", ["pre_llm_call"], () => 42)); // neither a string nor {context}
    const report = await d.emit("pre_llm_call", event);
    assert.deepEqual(report.failed.map((f) => [f.plugin, f.kind]), [["bad", "bad_output"]]);
    assert.deepEqual(seen.map((e) => [e.plugin, e.failure ?? null]), [["bad", "bad_output"]]);
    const stats = d.stats("bad")!;
    assert.equal(stats.calls, 1);
    assert.equal(stats.ok, 0);
    assert.equal(stats.failures.bad_output, 1);
    assert.equal(stats.latency_ms.samples, 1);
  });

  // Found by an outside probe: a plugin at its KV quota was quarantined on every node, which stopped
  // the on_session_delete clean-up that would have freed its quota.
  it("counts a stored-quota and an unavailable failure without bringing a quarantine nearer; a per-call limit or a trap quarantines", async () => {
    const d = new HookDispatcher({ quarantineAfter: 2 });
    const failing: Array<[string, PluginCallError]> = [
      ["full", new PluginCallError("quota", "kv quota of full reached (10 keys, 100 bytes stored, 0 keys being written; limits 10 keys, 1000 bytes)")],
      ["down", new PluginCallError("unavailable", "database: fetch failed")],
      ["greedy", new PluginCallError("quota", "kv: one call may stage at most 4194304 bytes of writes")],
      ["traps", new PluginCallError("trap", "unreachable")],
    ];
    for (const [name, err] of failing) {
      d.subscribe(callbackSubscriber(name, ["pre_llm_call"], () => {
        throw err;
      }));
    }
    for (let i = 0; i < 4; i++) await d.emit("pre_llm_call", event);
    for (const name of ["full", "down"]) {
      const stats = d.stats(name)!;
      assert.equal(stats.calls, 4, name);
      assert.equal(stats.quarantined, null, name);
      assert.deepEqual(stats.quarantined_hooks, {}, name);
      // Nor is the hook shown as failing (a reload storm's closed calls named one the plugin never failed).
      assert.deepEqual([stats.failing_hook, stats.last_error !== null], [null, true], name);
    }
    for (const name of ["greedy", "traps"]) assert.match(d.stats(name)!.quarantined ?? "", /quarantined after 2 consecutive failures/, name);
    assert.equal(d.stats("traps")!.failing_hook, "pre_llm_call");
  });

  it("keeps naming the failing hook after a command or tool of the plugin fails", async () => {
    const d = new HookDispatcher();
    d.subscribe(callbackSubscriber("bad", ["pre_llm_call"], () => 42));
    await d.emit("pre_llm_call", event);
    d.recordExternalCall("bad", 1, new PluginCallError("trap", "tool_x failed"));
    const stats = d.stats("bad")!;
    assert.equal(stats.failing_hook, "pre_llm_call");
    assert.match(stats.last_error!, /tool_x failed/);
  });

  // Stored, a lone surrogate becomes U+FFFD: a transform's "X\ud800Y" was the reply's as it was and
  // the history's as "X\uFFFDY" (found by an outside hostile-plugin probe).
  it("reads a lone surrogate escaped in a plugin's output as U+FFFD; a pair stays the character", () => {
    const read = new HookDispatcher().outputReader("transform_llm_output");
    assert.deepEqual(read(String.raw`{"response":"X\ud800Y \ud83d\ude00 \udc00"}`)?.value, { response: "X\uFFFDY \u{1F600} \uFFFD" });
    assert.deepEqual(read('{"response":"plain"}')?.value, { response: "plain" });
  });

  it("hands a WASM plugin the payload's JSON and a TS callback its object: the same payload, envelope first", async () => {
    const d = new HookDispatcher();
    const texts: string[] = [];
    const objects: unknown[] = [];
    d.subscribe({ name: "a-wasm", hooks: new Set(["pre_llm_call", "on_session_finalize"] as const), call: (del) => (texts.push(del.json()), {}) });
    d.subscribe(callbackSubscriber("b-ts", ["pre_llm_call", "on_session_finalize"], (p) => void objects.push(p)));
    await d.emit("pre_llm_call", { ...event, user_message: 'quote " and \u2028 and \ud800' });
    await d.emit("on_session_finalize", {} as never); // no field of its own: still one valid object
    assert.deepEqual(texts.map((t) => JSON.parse(t)), objects);
    assert.ok(texts[0]!.startsWith('{"hook":"pre_llm_call","schema_version":1,"session_id":"s1",'));
    assert.equal(texts[1], '{"hook":"on_session_finalize","schema_version":1}');
    assert.ok(Object.isFrozen(objects[0]));
  });

  it("writes a payload's JSON exactly as JSON.stringify of its object, whatever the values", async () => {
    const d = new HookDispatcher();
    const texts: string[] = [];
    const objects: unknown[] = [];
    d.subscribe({ name: "a-wasm", hooks: new Set(["post_tool_call"] as const), call: (del) => (texts.push(del.json()), {}) });
    d.subscribe(callbackSubscriber("b-ts", ["post_tool_call"], (p) => void objects.push(p)));
    const odd = ['quote " backslash \\ tab \t', "nul \u0000 unit sep \u001f", "lone \ud800 high, pair 😀", "é ü \u2028", ""];
    for (const text of odd) {
      for (const n of [0, -0, 1.5, -7, 1e21, 2 ** 53 + 2, Number.NaN, Number.POSITIVE_INFINITY]) {
        await d.emit("post_tool_call", {
          session_id: text,
          turn_id: "t1",
          tool_call_id: "c1",
          tool_name: "calc",
          args: { nested: [text, n, null, true, { deep: undefined }] },
          result: text,
          duration_ms: n,
          status: "ok",
          error: null,
          maybe: undefined,
        } as never);
      }
    }
    assert.equal(texts.length, objects.length);
    texts.forEach((t, i) => assert.equal(t, JSON.stringify(objects[i]), t));
  });
});
