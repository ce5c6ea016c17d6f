import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { recordHooks, type HookRecorder } from "./helpers/hooks.ts";

describe("sessions over HTTP", () => {
  let t: TestServer;
  let rec: HookRecorder;
  before(async () => {
    t = await startTestServer({ before: (core) => void (rec = recordHooks(core.dispatcher)) });
  });
  after(() => t.close());

  it("creates a session and fires on_session_start", async () => {
    const res = await t.api("POST", "/v1/sessions", { profile: "work", platform: "telegram", source: { user_id: "u1", chat_id: "c1" } });
    assert.equal(res.status, 201);
    const s = res.body.session;
    assert.equal(s.profile, "work");
    assert.deepEqual(s.source, { user_id: "u1", chat_id: "c1", thread_id: null });
    const [ev] = rec.of("on_session_start");
    assert.deepEqual(
      { ...ev },
      { hook: "on_session_start", schema_version: 1, session_id: s.id, profile: "work", platform: "telegram", source: { user_id: "u1", chat_id: "c1", thread_id: null } },
    );
    const got = await t.api("GET", `/v1/sessions/${s.id}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.session.id, s.id);
  });

  it("runs a turn and stores user and assistant messages", async () => {
    const s = (await t.api("POST", "/v1/sessions", {})).body.session;
    const turn = await t.api("POST", `/v1/sessions/${s.id}/turns`, { message: "hello there" });
    assert.equal(turn.status, 200);
    assert.equal(turn.body.reply, "You said: hello there");
    const msgs = (await t.api("GET", `/v1/sessions/${s.id}/messages`)).body.messages;
    assert.deepEqual(msgs.map((m: any) => [m.seq, m.role, m.content]), [
      [1, "user", "hello there"],
      [2, "assistant", "You said: hello there"],
    ]);
  });
});
