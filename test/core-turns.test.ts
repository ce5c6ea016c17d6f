// Turns through HTTP: pre_llm_call injection, tools, post_llm_call, slash commands and their kwargs,
// sensitive-command refusal, and parallel turns on one session.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { TEST_DBS } from "./helpers/dialects.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { recordHooks, type HookRecorder } from "./helpers/hooks.ts";
import { seed } from "./helpers/seed.ts";
import { loseAnswerOnce } from "./helpers/lost-answer.ts";

for (const db of TEST_DBS) {
  describe(`turns [${db}]`, () => {
    let t: TestServer;
    let rec: HookRecorder;
    const NOW = Date.UTC(2030, 0, 2, 3, 4, 5);
    before(async () => {
      t = await startTestServer({
        db,
        now: () => NOW,
        config: { plugins: { command_users: { "admin-only": ["alice"], "listed-plain": ["alice"] } } },
        before: (core) => {
          rec = recordHooks(core.dispatcher, { name: "recorder" });
          // Two context providers; injected text must come out in plugin name order, not subscribe order.
          recordHooks(core.dispatcher, { name: "zeta", hooks: ["pre_llm_call"], reply: () => ({ context: "ZETA: remember the build uses npm" }) });
          recordHooks(core.dispatcher, { name: "alpha", hooks: ["pre_llm_call"], reply: (p) => `ALPHA: user said ${(p as any).user_message.length} chars` });
          recordHooks(core.dispatcher, { name: "mute", hooks: ["pre_llm_call"], reply: () => "   " });
          core.commands.register({ name: "kw", description: "shows kwargs", wants: ["session_id", "platform"], run: (call) => JSON.stringify(call) });
          core.commands.register({ name: "plug", description: "plugin command", plugin: "some-plugin", run: (call) => JSON.stringify(call) });
          core.commands.register({ name: "secret", description: "sensitive", sensitive: true, wants: ["source"], run: (call) => `ok ${call.source?.user_id}` });
          core.commands.register({ name: "admin-only", description: "limited", sensitive: true, run: () => "admin ok" });
          core.commands.register({ name: "listed-plain", description: "not sensitive, but listed", run: () => "listed ok" });
          core.commands.register({ name: "constructor", description: "named like an object's own member", run: () => "ctor ok" });
        },
      });
    });
    after(() => t.close());

    const newSession = async (body: object = {}) => (await t.api("POST", "/v1/sessions", body)).body.session.id as string;

    it("injects pre_llm_call context into this model call only, in plugin name order, and reports it", async () => {
      const id = await newSession();
      rec.clear();
      const res = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "deploy it" });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.injected, [
        { plugin: "alpha", context: "ALPHA: user said 9 chars" },
        { plugin: "zeta", context: "ZETA: remember the build uses npm" },
      ]);
      // The model saw the user's text with both contexts appended after a blank line each.
      assert.equal(res.body.reply, "You said: deploy it\n\nALPHA: user said 9 chars\n\nZETA: remember the build uses npm");
      const msgs = (await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages;
      assert.equal(msgs[0].content, "deploy it", "stored history keeps the user's own text");
      const [pre] = rec.of("pre_llm_call");
      assert.equal(pre!.user_message, "deploy it");
      assert.deepEqual(pre!.conversation_history, []);
      const [post] = rec.of("post_llm_call");
      assert.equal(post!.session_id, id);
      assert.equal(post!.response, res.body.reply);
      assert.ok(post!.usage.total_tokens > 0);
      // Second turn: history carries the stored (un-injected) messages.
      rec.clear();
      await t.api("POST", `/v1/sessions/${id}/turns`, { message: "again" });
      assert.deepEqual(rec.of("pre_llm_call")[0]!.conversation_history.map((m) => m.content), ["deploy it", res.body.reply]);
    });

    it("carries stored text into the next turn's history exactly as stored, in order", async () => {
      const id = await newSession();
      // Quotes, backslashes, JSON-looking text, controls, a non-BMP character, a line separator.
      const texts = ['say "hi" \\ {"a":[1]} \\u0041', "tab\tnew\nline\r\u0001\u001f end", "emoji 🎉 and \u2028 sep, 数字 ١٢٣", "  "];
      for (const message of texts) assert.equal((await t.api("POST", `/v1/sessions/${id}/turns`, { message })).status, 200);
      const stored = (await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages as Array<{ seq: number; role: string; content: string }>;
      rec.clear();
      assert.equal((await t.api("POST", `/v1/sessions/${id}/turns`, { message: "last" })).status, 200);
      const seen = rec.of("pre_llm_call")[0]!.conversation_history;
      assert.deepEqual(seen, stored.map((m) => ({ role: m.role, content: m.content })));
      assert.deepEqual(seen.filter((m) => m.role === "user").map((m) => m.content), texts);
    });

    it("runs the built-in tools with pre_tool_call and post_tool_call", async () => {
      const id = await newSession();
      rec.clear();
      const calc = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "calc (2 + 3) * 4" });
      assert.equal(calc.status, 200);
      assert.deepEqual(
        calc.body.tool_calls.map((r: any) => ({ tool_name: r.tool_name, args: r.args, result: r.result, status: r.status, error: r.error })),
        [{ tool_name: "calculator", args: { expression: "(2 + 3) * 4" }, result: "(2 + 3) * 4 = 20", status: "ok", error: null }],
      );
      assert.match(calc.body.reply, /returned \(2 \+ 3\) \* 4 = 20\.$/);
      assert.deepEqual(rec.of("pre_tool_call").map((e) => [e.tool_name, e.args]), [["calculator", { expression: "(2 + 3) * 4" }]]);
      assert.deepEqual(rec.of("post_tool_call").map((e) => [e.session_id, e.result]), [[id, "(2 + 3) * 4 = 20"]]);
      const clock = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "what time is it?" });
      assert.equal(clock.body.tool_calls[0].result, new Date(NOW).toISOString());
      const roles = (await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages.map((m: any) => m.role);
      assert.deepEqual(roles, ["user", "tool", "assistant", "user", "tool", "assistant"]);
      // A bad expression is a failed tool call, not a result that says "error".
      rec.clear();
      const bad = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "calc 2 ** 3" });
      assert.deepEqual(
        bad.body.tool_calls.map((r: any) => [r.status, r.result]),
        [["error", "error: unexpected *"]],
      );
      assert.deepEqual(rec.of("post_tool_call").map((e) => [e.status, e.error]), [["error", "unexpected *"]]);
    });

    it("ends, finalizes and resets sessions", async () => {
      const id = await newSession({ platform: "slack", source: { chat_id: "c9" } });
      rec.clear();
      const reset = await t.api("POST", `/v1/sessions/${id}/reset`);
      assert.equal(reset.status, 201);
      const fresh = reset.body.session;
      assert.notEqual(fresh.id, id);
      assert.equal(fresh.platform, "slack");
      assert.deepEqual(rec.events.map((e) => e.hook), ["on_session_end", "on_session_finalize", "on_session_start", "on_session_reset"]);
      assert.deepEqual(rec.of("on_session_reset")[0], { hook: "on_session_reset", schema_version: 1, session_id: fresh.id, old_session_id: id });
      assert.equal(rec.of("on_session_end")[0]!.reason, "reset");
      const turnOnEnded = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "hi" });
      assert.equal(turnOnEnded.status, 409);
      // A slash command is a turn too: refused the same way, naming where the conversation went.
      const commandOnEnded = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "/kw" });
      assert.deepEqual([commandOnEnded.status, commandOnEnded.body.error.code], [409, "session_ended"]);
      const commandForEnded = await t.api("POST", "/v1/commands/kw", { session_id: id });
      assert.deepEqual([commandForEnded.status, commandForEnded.body.error.code], [409, "session_ended"]);
      rec.clear();
      const end = await t.api("POST", `/v1/sessions/${fresh.id}/end`, { reason: "user_left" });
      assert.equal(end.body.ended, true);
      const again = await t.api("POST", `/v1/sessions/${fresh.id}/end`, {});
      assert.equal(again.body.ended, false);
      assert.deepEqual(rec.events.map((e) => [e.hook, (e as any).reason]), [["on_session_end", "user_left"], ["on_session_finalize", undefined]]);
    });

    it("runs slash commands instead of the model, with the kwargs each handler asked for", async () => {
      const id = await newSession({ platform: "discord", source: { user_id: "bob", chat_id: "c1", thread_id: "t1" } });
      rec.clear();
      const kw = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "/kw  some args here " });
      assert.equal(kw.status, 200);
      assert.equal(kw.body.type, "command");
      assert.deepEqual(JSON.parse(kw.body.output), { raw_args: "some args here", session_id: id, platform: "discord" });
      const plug = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "/plug x" });
      assert.deepEqual(JSON.parse(plug.body.output), {
        raw_args: "x",
        session_id: id,
        session_key: "discord:c1:t1",
        platform: "discord",
        source: { user_id: "bob", chat_id: "c1", thread_id: "t1" },
      });
      assert.equal(rec.of("pre_llm_call").length, 0, "a command does not call the model");
      assert.equal((await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages.length, 0);
      // Ids holding the separator: two conversations shared "matrix:!room:a.org:t1" (an outside probe).
      const keyOf = async (source: object) => {
        const sid = await newSession({ platform: "matrix", source });
        return JSON.parse((await t.api("POST", `/v1/sessions/${sid}/turns`, { message: "/plug" })).body.output).session_key;
      };
      assert.equal(await keyOf({ chat_id: "!room:a.org", thread_id: "t1" }), "matrix:!room%3Aa.org:t1");
      assert.equal(await keyOf({ chat_id: "!room", thread_id: "a.org:t1" }), "matrix:!room:a.org%3At1");
      assert.equal(await keyOf({ chat_id: "100%", thread_id: null }), "matrix:100%25:");
      const list = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "/commands" });
      assert.match(list.body.output, /\/compress/);
      assert.match(list.body.output, /\/secret \(sensitive\)/);
      const unknown = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "/nope" });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.error.code, "unknown_command");
    });

    it("refuses sensitive commands without a caller identity, and limits them to listed users", async () => {
      const anon = await newSession();
      const refused = await t.api("POST", `/v1/sessions/${anon}/turns`, { message: "/secret" });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.error.code, "forbidden");
      const bare = await t.api("POST", "/v1/commands/secret", {});
      assert.equal(bare.status, 403);
      const as = async (source: object) => (await t.api("POST", "/v1/sessions", { source })).body.session.id as string;
      const noUser = await t.api("POST", "/v1/commands/secret", { session_id: await as({ chat_id: "c" }) });
      assert.equal(noUser.status, 403);
      const carol = await as({ user_id: "carol" });
      const ok = await t.api("POST", "/v1/commands/secret", { session_id: carol });
      assert.deepEqual([ok.status, ok.body.output], [200, "ok carol"]);
      assert.equal((await t.api("POST", "/v1/commands/admin-only", { session_id: carol })).status, 403);
      assert.equal((await t.api("POST", "/v1/commands/admin-only", { session_id: await as({ user_id: "alice" }) })).body.output, "admin ok");
      // A command the operator listed is limited to its users even when it is not marked sensitive.
      assert.equal((await t.api("POST", "/v1/commands/listed-plain", { session_id: carol })).status, 403);
      const anonymous = await t.api("POST", "/v1/commands/listed-plain", {});
      assert.deepEqual([anonymous.status, anonymous.body.error.code], [403, "forbidden"]);
      assert.match(anonymous.body.error.message, /limited to listed users/);
      assert.equal((await t.api("POST", "/v1/commands/listed-plain", { session_id: await as({ user_id: "alice" }) })).body.output, "listed ok");
      // A command named like a member every object has is not "listed" by that member (it was a 500).
      for (const body of [{}, { session_id: carol }]) {
        const ctor = await t.api("POST", "/v1/commands/constructor", body);
        assert.deepEqual([ctor.status, ctor.body.output], [200, "ctor ok"], JSON.stringify(ctor.body));
      }
      // The identity is the session's: a body claiming alice's source or a platform is refused outright.
      for (const claim of [{ source: { user_id: "alice" } }, { session_id: carol, source: { user_id: "alice" } }, { session_id: carol, platform: "admin" }]) {
        const forged = await t.api("POST", "/v1/commands/admin-only", claim);
        assert.equal(forged.status, 400, JSON.stringify(claim));
        assert.match(forged.body.error.message, /identity comes from the session/);
      }
      const listed = await t.api("GET", "/v1/commands");
      assert.ok(listed.body.commands.some((c: any) => c.name === "secret" && c.sensitive === true));
    });

    it("ends and deletes with /exit --delete", async () => {
      const id = await newSession();
      const child = (await t.api("POST", "/v1/sessions", { parent_session_id: id })).body.session.id;
      rec.clear();
      const res = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "/exit --delete" });
      assert.equal(res.status, 200);
      assert.deepEqual(rec.events.map((e) => e.hook), ["on_session_end", "on_session_finalize", "on_session_delete"]);
      const del = rec.of("on_session_delete")[0]!;
      assert.equal(del.reason, "delete");
      assert.deepEqual(del.deleted_ids, [id, child].sort());
      assert.equal((await t.api("GET", `/v1/sessions/${id}`)).status, 404);
      const bad = await t.api("POST", `/v1/sessions/${await newSession()}/turns`, { message: "/exit --now" });
      assert.equal(bad.status, 422);
    });

    it("takes a lone surrogate (a broken \\ud800 escape in the body) as U+FFFD everywhere, and the session stays readable", async () => {
      // SQLite decodes the escape JSON.stringify keeps for it to bytes that are not UTF-8, and the
      // native driver aborted the process reading them back. Then (an outside probe) the answer and
      // the hooks had the surrogate while the history had U+FFFD.
      const id = await newSession();
      rec.clear();
      const res = await t.api("POST", `/v1/sessions/${id}/turns`, '{"message":"x\\ud800y \\ud83d\\ude00"}');
      assert.equal(res.status, 200);
      const msgs = (await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages;
      assert.equal(msgs[0].content, "x\ufffdy \u{1f600}");
      assert.equal((rec.of("pre_llm_call")[0] as any).user_message, "x\ufffdy \u{1f600}");
      assert.equal(res.body.reply, msgs[1].content, "the answer is what the history keeps");
      assert.equal((await t.api("POST", `/v1/sessions/${id}/turns`, { message: "again" })).status, 200);
    });

    // An outside multi-node probe: sqld committed a turn's messages and the answer was lost; the
    // turn answered 503 "nothing was changed", and the client's retry stored the turn twice (3 of 3).
    // Another node's turn may land before the check (its guard passed because ours was there).
    for (const othersFirst of [false, true]) {
      it(`a turn whose commit answer was lost, though it committed, answers as done and is stored once${othersFirst ? " (another turn already after it)" : ""}`, async () => {
        const id = await newSession();
        const lost = loseAnswerOnce(t.core.storage, "batch", {
          when: ([items]) => (items as Array<{ sql?: string }>).some((i) => i.sql?.startsWith("insert into messages")),
          beforeLoss: othersFirst ? () => seed(t.core, id, [["user", "other node"], ["assistant", "other reply"]]) : undefined,
        });
        try {
          const res = await t.api("POST", `/v1/sessions/${id}/turns`, { message: "only once" });
          assert.equal(res.status, 200, JSON.stringify(res.body));
          assert.equal(lost.lost, true, "the commit's answer was lost");
        } finally {
          lost.restore();
        }
        const msgs = (await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages;
        assert.deepEqual(msgs.map((m: any) => m.role), othersFirst ? ["user", "assistant", "user", "assistant"] : ["user", "assistant"]);
        assert.equal(msgs[0].content, "only once");
      });
    }

    it("serializes parallel turns on one session without losing messages", async () => {
      const id = await newSession();
      const n = 12;
      const results = await Promise.all(Array.from({ length: n }, (_, i) => t.api("POST", `/v1/sessions/${id}/turns`, { message: `m${i}` })));
      assert.ok(results.every((r) => r.status === 200));
      const msgs = (await t.api("GET", `/v1/sessions/${id}/messages`)).body.messages;
      assert.equal(msgs.length, 2 * n);
      assert.deepEqual(msgs.map((m: any) => m.seq), Array.from({ length: 2 * n }, (_, i) => i + 1));
      // Each user message is directly followed by its own answer.
      for (let i = 0; i < msgs.length; i += 2) assert.ok(msgs[i + 1].content.startsWith(`You said: ${msgs[i].content}`));
    });
  });
}
