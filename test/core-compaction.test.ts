// Compaction through HTTP (and CLI, /compress): every kind, every automatic reason from its real
// trigger, exactly one post_compaction per change, none for no-ops.
import { describe, it, after } from "node:test";
import assert from "node:assert/strict";
import type { ConfigInput } from "../runtime/config.ts";
import { estimateTokens } from "../runtime/tokens.ts";
import { runCli } from "../runtime/cli.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { recordHooks, type HookRecorder } from "./helpers/hooks.ts";
import { manualClock, seed, words, type Seed } from "./helpers/seed.ts";

const LONG = words(80); // ~98 tokens
const open: TestServer[] = [];
after(async () => {
  for (const t of open) await t.close();
});

async function server(config: ConfigInput, clock = manualClock()): Promise<{ t: TestServer; rec: HookRecorder; clock: typeof clock }> {
  let rec!: HookRecorder;
  const t = await startTestServer({ config, now: clock.now, before: (core) => void (rec = recordHooks(core.dispatcher)) });
  open.push(t);
  return { t, rec, clock };
}

async function sessionWith(t: TestServer, rows: Seed): Promise<{ id: string; tokens: number }> {
  const id = (await t.api("POST", "/v1/sessions", {})).body.session.id as string;
  return { id, tokens: await seed(t.core, id, rows) };
}

const compactionFields = (e: any) => ({ kind: e.kind, reason: e.reason, session_id: e.session_id, old_session_id: e.old_session_id });

const MIXED: Seed = [
  ["user", LONG],
  ["tool", LONG, "calculator"],
  ["assistant", LONG],
  ["user", LONG],
  ["tool", LONG, "calculator"],
  ["assistant", LONG],
  ["user", LONG],
  ["assistant", LONG],
];

describe("manual compaction: every kind, every manual entry point", () => {
  it("summarize in place, micro_summarize, prune_tool_results, provider_native over HTTP", async () => {
    const { t, rec } = await server({ compaction: { keep_recent_messages: 2, cooldown_seconds: 0 } });
    for (const kind of ["prune_tool_results", "micro_summarize", "summarize", "provider_native"] as const) {
      const { id, tokens } = await sessionWith(t, MIXED);
      rec.clear();
      const res = await t.api("POST", `/v1/sessions/${id}/compress`, { kind });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.compacted, true, kind);
      const events = rec.of("post_compaction");
      assert.equal(events.length, 1, kind);
      const e = events[0]!;
      assert.deepEqual(compactionFields(e), { kind, reason: "manual", session_id: id, old_session_id: "" });
      assert.equal(e.before_tokens, tokens);
      assert.ok(e.after_tokens < e.before_tokens);
      const session = (await t.api("GET", `/v1/sessions/${id}`)).body.session;
      assert.equal(session.token_estimate, e.after_tokens, "the hook reports what is stored");
      const msgs = (await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages;
      if (kind === "prune_tool_results") {
        assert.equal(e.messages_removed, 0);
        assert.deepEqual(msgs.filter((m: any) => m.role === "tool").map((m: any) => m.content), [
          `[tool result pruned: ${LONG.length} chars]`,
          `[tool result pruned: ${LONG.length} chars]`,
        ]);
        // Pruning again changes nothing: no second event.
        rec.clear();
        const again = await t.api("POST", `/v1/sessions/${id}/compress`, { kind });
        assert.deepEqual([again.body.compacted, again.body.skipped], [false, "empty"]);
        assert.equal(rec.of("post_compaction").length, 0);
      } else if (kind === "micro_summarize") {
        assert.equal(e.messages_removed, 3);
        assert.deepEqual(msgs.map((m: any) => m.role), ["summary", "user", "tool", "assistant", "user", "assistant"]);
      } else {
        assert.equal(e.messages_removed, 6);
        assert.deepEqual(msgs.map((m: any) => m.role), ["summary", "user", "assistant"]);
        if (kind === "provider_native") assert.match(msgs[0].content, /^\[native compaction\]/);
      }
    }
  });

  // After a summary that kept no user message (a turn of tool calls), the next turn was reported as
  // the session's first (an outside probe); a rotated session continues its conversation too.
  it("the turn after a summary is never the conversation's first (in place or rotated)", async () => {
    const { t, rec } = await server({ compaction: { keep_recent_messages: 2, cooldown_seconds: 0 } });
    const { id } = await sessionWith(t, [["user", LONG], ["assistant", LONG], ["user", LONG], ["tool", LONG], ["assistant", LONG]]);
    await t.api("POST", `/v1/sessions/${id}/compress`, { kind: "summarize" });
    assert.deepEqual((await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages.map((m: any) => m.role), ["summary", "tool", "assistant"]);
    rec.clear();
    await t.api("POST", `/v1/sessions/${id}/turns`, { message: "go on" });
    const rotated = (await t.api("POST", `/v1/sessions/${id}/compress`, { kind: "summarize", rotate: true })).body.session_id;
    await t.api("POST", `/v1/sessions/${rotated}/turns`, { message: "and on" });
    const fresh = (await t.api("POST", "/v1/sessions", {})).body.session.id;
    await t.api("POST", `/v1/sessions/${fresh}/turns`, { message: "hello" });
    assert.deepEqual(rec.of("pre_llm_call").map((e) => [e.session_id, e.is_first_turn]), [[id, false], [rotated, false], [fresh, true]]);
  });

  it("summarize rotating to a new session id keeps the chain", async () => {
    const { t, rec } = await server({ compaction: { keep_recent_messages: 2 } });
    const { id } = await sessionWith(t, MIXED);
    rec.clear();
    const res = await t.api("POST", `/v1/sessions/${id}/compress`, { kind: "summarize", rotate: true });
    assert.equal(res.body.compacted, true);
    const next = res.body.session_id;
    assert.notEqual(next, id);
    assert.deepEqual(rec.of("post_compaction").map(compactionFields), [{ kind: "summarize", reason: "manual", session_id: next, old_session_id: id }]);
    // The old session ends and the new one starts as with /reset, before post_compaction links them.
    assert.deepEqual(
      rec.events.map((e: any) => [e.hook, e.session_id, e.reason ?? e.old_session_id ?? ""]),
      [
        ["on_session_end", id, "compacted"],
        ["on_session_finalize", id, ""],
        ["on_session_start", next, ""],
        ["post_compaction", next, "manual"],
      ],
    );
    assert.equal(rec.of("on_session_start")[0]!.profile, "default", "the successor's payload matches the catalogue");
    const fresh = (await t.api("GET", `/v1/sessions/${next}`)).body.session;
    assert.equal(fresh.compacted_from, id);
    const old = (await t.api("GET", `/v1/sessions/${id}`)).body.session;
    assert.equal(old.end_reason, "compacted");
    assert.equal((await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages.length, MIXED.length, "the old row keeps its history");
    assert.deepEqual((await t.api("GET", `/v1/sessions/${next}/messages`)).body.messages.map((m: any) => [m.seq, m.role]), [
      [1, "summary"],
      [2, "user"],
      [3, "assistant"],
    ]);
    // The ended predecessor is not compacted again by hand; the refusal names its successor.
    const again = await t.api("POST", `/v1/sessions/${id}/compress`, {});
    assert.deepEqual([again.status, again.body.error.message], [409, `session ${id} has ended (compacted); it continues in session ${next}`]);
    // A turn sent to it says where the conversation went on (it named no successor).
    const late = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "still there?" });
    assert.deepEqual([late.status, late.body.error.message], [409, `session ${id} has ended (compacted); it continues in session ${next}`]);
    // Only summarize rotates: asking another kind to is refused, not silently done in place.
    rec.clear();
    const other = await sessionWith(t, MIXED);
    const refused = await t.api("POST", `/v1/sessions/${other.id}/compress`, { kind: "micro_summarize", rotate: true });
    assert.deepEqual([refused.status, refused.body.error.code], [400, "invalid_request"]);
    // In a turn it is the command's misuse, answered as a bad kind or an unknown flag is (422).
    const misuse = await t.api("POST", `/v1/sessions/${other.id}/turns`, { message: "/compress prune_tool_results --rotate" });
    assert.deepEqual([misuse.status, misuse.body.error.message], [422, "/compress --rotate applies to summarize only, not prune_tool_results"]);
    const badKind = await t.api("POST", `/v1/sessions/${other.id}/turns`, { message: "/compress bogus" });
    const badFlag = await t.api("POST", `/v1/sessions/${other.id}/turns`, { message: "/compress --rotat" });
    assert.deepEqual([badKind.status, badKind.body.error.code], [misuse.status, misuse.body.error.code]);
    assert.deepEqual([badFlag.status, badFlag.body.error.message], [422, badKind.body.error.message]);
    assert.equal(await runCli(["compress", other.id, "--kind", "micro_summarize", "--rotate"], { out: () => {}, err: () => {} }, { core: t.core }), 2);
    assert.deepEqual(rec.of("post_compaction"), []);
    assert.equal((await t.api("GET", `/v1/sessions/${other.id}/messages`)).body.messages.length, MIXED.length);
  });

  it("/compress in a turn and `hookbox compress` are manual too", async () => {
    const { t, rec } = await server({ compaction: { keep_recent_messages: 2 } });
    const a = await sessionWith(t, MIXED);
    rec.clear();
    const turn = await t.api("POST", `/v1/sessions/${a.id}/turns`, { message: "/compress micro_summarize" });
    assert.equal(turn.status, 200);
    assert.match(turn.body.output, /^compacted \d+ -> \d+ tokens \(micro_summarize\)$/);
    const b = await sessionWith(t, MIXED);
    const out: string[] = [];
    const code = await runCli(["compress", b.id, "--kind", "summarize"], { out: (l) => out.push(l), err: (l) => out.push(l) }, { core: t.core });
    assert.equal(code, 0, out.join("\n"));
    assert.deepEqual(rec.of("post_compaction").map(compactionFields), [
      { kind: "micro_summarize", reason: "manual", session_id: a.id, old_session_id: "" },
      { kind: "summarize", reason: "manual", session_id: b.id, old_session_id: "" },
    ]);
    assert.equal(await runCli(["compress", b.id, "--kind", "bogus"], { out: () => {}, err: () => {} }, { core: t.core }), 2);
    assert.equal(await runCli(["compress", "s_missing"], { out: () => {}, err: () => {} }, { core: t.core }), 1);
  });

  it("no-ops fire nothing: empty, result not shorter, missing session", async () => {
    const { t, rec } = await server({ compaction: { keep_recent_messages: 2 } });
    rec.clear();
    const empty = await sessionWith(t, []);
    const r1 = await t.api("POST", `/v1/sessions/${empty.id}/compress`, {});
    assert.deepEqual([r1.status, r1.body.compacted, r1.body.skipped], [200, false, "empty"]);
    const slash = await t.api("POST", `/v1/sessions/${empty.id}/turns`, { message: "/compress" });
    assert.equal(slash.body.output, "nothing compacted (empty)");
    const tiny = await sessionWith(t, [["user", "a"], ["assistant", "b"], ["user", "c"], ["assistant", "d"]]);
    const r2 = await t.api("POST", `/v1/sessions/${tiny.id}/compress`, {});
    assert.deepEqual([r2.body.compacted, r2.body.skipped], [false, "not_shorter"]);
    assert.equal((await t.api("GET", `/v1/sessions/${tiny.id}/messages`)).body.messages.length, 4);
    // micro_summarize folds the older half of the 2 compactable messages (1): its skip says what it needs.
    const micro = await t.api("POST", `/v1/sessions/${tiny.id}/compress`, { kind: "micro_summarize" });
    assert.deepEqual([micro.body.compacted, micro.body.skipped], [false, "empty"]);
    assert.match(micro.body.detail, /folds the older half of what is compactable; .* this session has 4, so it needs at least 5$/);
    assert.equal((await t.api("POST", "/v1/sessions/s_nope/compress", {})).status, 404);
    assert.equal((await t.api("POST", `/v1/sessions/${tiny.id}/compress`, { kind: "shrink" })).status, 400);
    assert.equal(rec.of("post_compaction").length, 0);
  });
});

describe("automatic compaction reasons from their real triggers", () => {
  const turn = (t: TestServer, id: string, message: string) => t.api("POST", `/v1/sessions/${id}/turns`, { message });

  it("pre_api: the stored context is over budget before the model call", async () => {
    const { t, rec } = await server({ compaction: { context_budget_tokens: 200, keep_recent_messages: 2, cooldown_seconds: 30 } });
    const { id } = await sessionWith(t, [["user", LONG], ["assistant", LONG], ["user", LONG], ["assistant", LONG]]);
    rec.clear();
    const res = await turn(t, id, "hi");
    assert.equal(res.status, 200);
    assert.deepEqual(rec.of("post_compaction").map((e) => [e.kind, e.reason, e.messages_removed]), [["summarize", "pre_api", 2]]);
    assert.deepEqual(res.body.compactions.map((c: any) => c.reason), ["pre_api"]);
    // Cooldown: the next turn is still over budget, but automatic compaction waits.
    rec.clear();
    const next = await turn(t, id, "again");
    assert.deepEqual(next.body.compactions, []);
    assert.equal(rec.of("post_compaction").length, 0);
  });

  it("post_tool: a tool result pushes the context over budget; old tool output is pruned", async () => {
    const rows: Seed = [["user", "q"], ["tool", LONG, "calculator"], ["user", "r"], ["assistant", "s"]];
    const seedTokens = rows.reduce((n, [, c]) => n + estimateTokens(c), 0);
    const message = "what time is it?";
    const budget = seedTokens + estimateTokens(message) + 3; // the clock's 24-char answer is 6 tokens
    const { t, rec } = await server({ compaction: { context_budget_tokens: budget, keep_recent_messages: 2, cooldown_seconds: 30 } });
    const { id } = await sessionWith(t, rows);
    rec.clear();
    const res = await turn(t, id, message);
    assert.deepEqual(rec.of("post_compaction").map((e) => [e.kind, e.reason, e.session_id]), [["prune_tool_results", "post_tool", id]]);
    assert.equal(res.body.tool_calls[0].tool_name, "clock");
  });

  it("overflow: the provider rejects the prompt; the turn compacts and retries", async () => {
    const { t, rec } = await server({
      provider: { type: "local", context_window_tokens: 300 },
      compaction: { keep_recent_messages: 2, cooldown_seconds: 30 },
    });
    const { id } = await sessionWith(t, Array.from({ length: 6 }, (_, i): [string, string] => [i % 2 ? "assistant" : "user", LONG]));
    rec.clear();
    const res = await turn(t, id, "hello");
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.reply, "You said: hello");
    assert.deepEqual(rec.of("post_compaction").map((e) => [e.kind, e.reason]), [["summarize", "overflow"]]);
    const stored = (await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages;
    assert.deepEqual(stored.slice(-2).map((m: any) => m.content), ["hello", "You said: hello"]);
  });

  it("gateway_hygiene: the maintenance endpoint compacts sessions over budget, obeying the cooldown", async () => {
    const { t, rec, clock } = await server({ compaction: { context_budget_tokens: 200, keep_recent_messages: 2, cooldown_seconds: 30 } });
    const big = await sessionWith(t, [["user", LONG], ["assistant", LONG], ["user", LONG], ["assistant", LONG]]);
    await sessionWith(t, [["user", "small"]]);
    rec.clear();
    const first = await t.api("POST", "/v1/maintenance/hygiene", {});
    assert.deepEqual(first.body.compactions.map((c: any) => [c.session_id, c.reason]), [[big.id, "gateway_hygiene"]]);
    const second = await t.api("POST", "/v1/maintenance/hygiene", {});
    assert.deepEqual(second.body.compactions, [], "still over budget, but within the cooldown");
    assert.deepEqual(rec.of("post_compaction").map((e) => [e.session_id, e.kind, e.reason]), [[big.id, "summarize", "gateway_hygiene"]]);
    clock.advance(31_000);
    const third = await t.api("POST", "/v1/maintenance/hygiene", {});
    assert.equal(rec.of("post_compaction").length, third.body.compactions.length + 1, "one event per real compaction");
  });

  it("between_turns: the answer pushes the context over budget", async () => {
    const rows: Seed = [["user", LONG], ["assistant", LONG], ["user", LONG], ["assistant", LONG]];
    const message = words(60, "m");
    const budget = rows.reduce((n, [, c]) => n + estimateTokens(c), 0) + estimateTokens(message) + 1;
    const { t, rec } = await server({ compaction: { context_budget_tokens: budget, keep_recent_messages: 2, cooldown_seconds: 30 } });
    const { id } = await sessionWith(t, rows);
    rec.clear();
    const res = await turn(t, id, message);
    assert.deepEqual(rec.of("post_compaction").map((e) => [e.kind, e.reason, e.messages_removed]), [["micro_summarize", "between_turns", 2]]);
    assert.deepEqual(res.body.compactions.map((c: any) => c.reason), ["between_turns"]);
  });

  it("proactive_prune: close to the budget after a turn, old tool output goes", async () => {
    const rows: Seed = [["user", "q"], ["tool", LONG, "calculator"], ["user", "r"], ["assistant", "s"]];
    const after = rows.reduce((n, [, c]) => n + estimateTokens(c), 0) + estimateTokens("hello") + estimateTokens("You said: hello");
    const { t, rec } = await server({ compaction: { context_budget_tokens: after, keep_recent_messages: 2, cooldown_seconds: 30 } });
    const { id } = await sessionWith(t, rows);
    rec.clear();
    await turn(t, id, "hello");
    assert.deepEqual(rec.of("post_compaction").map((e) => [e.kind, e.reason]), [["prune_tool_results", "proactive_prune"]]);
  });

  it("provider: the provider compacted natively; storage mirrors it", async () => {
    const { t, rec } = await server({ provider: { type: "local", native_compaction_over_tokens: 200 }, compaction: { keep_recent_messages: 2 } });
    const { id } = await sessionWith(t, [["user", LONG], ["assistant", LONG], ["user", LONG], ["assistant", LONG]]);
    rec.clear();
    const res = await turn(t, id, "hi");
    assert.equal(res.status, 200);
    assert.deepEqual(rec.of("post_compaction").map((e) => [e.kind, e.reason, e.messages_removed]), [["provider_native", "provider", 3]]);
    const roles = (await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages.map((m: any) => m.role);
    assert.deepEqual(roles, ["summary", "assistant", "user", "assistant"]);
  });
});
