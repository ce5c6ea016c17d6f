import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { TEST_DBS } from "./helpers/dialects.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { recordHooks, type HookRecorder } from "./helpers/hooks.ts";
import { HOOK_NAMES } from "../hooks/catalogue.ts";
import { PluginNotFoundError, type PluginHost, type PluginInfo } from "../runtime/plugins/host.ts";

for (const db of TEST_DBS) {
  describe(`sessions over HTTP [${db}]`, () => {
    let t: TestServer;
    let rec: HookRecorder;
    before(async () => {
      t = await startTestServer({ db, before: (core) => void (rec = recordHooks(core.dispatcher)) });
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
        { hook: "on_session_start", schema_version: 1, session_id: s.id, profile: "work", platform: "telegram", source: { user_id: "u1", chat_id: "c1", thread_id: null }, model: "local" },
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

    it("lists sessions with filters and keyset pagination", async () => {
      for (let i = 0; i < 3; i++) await t.api("POST", "/v1/sessions", { profile: "paged" });
      const first = await t.api("GET", "/v1/sessions?profile=paged&limit=2");
      assert.equal(first.body.sessions.length, 2);
      const rest = await t.api("GET", `/v1/sessions?profile=paged&limit=2&after=${first.body.next}`);
      assert.equal(rest.body.sessions.length, 1);
      assert.equal(rest.body.next, null);
      assert.equal((await t.api("GET", "/v1/sessions?archived=true&profile=paged")).body.sessions.length, 0);
      // Paging goes on when the session the cursor names was deleted meanwhile (list, delete, next page).
      for (let i = 0; i < 3; i++) await t.api("POST", "/v1/sessions", { profile: "paged-del" });
      const page = await t.api("GET", "/v1/sessions?profile=paged-del&limit=2");
      assert.equal((await t.api("DELETE", `/v1/sessions/${page.body.sessions[1].id}`)).status, 200);
      const next = await t.api("GET", `/v1/sessions?profile=paged-del&limit=2&after=${page.body.next}`);
      assert.equal(next.status, 200, JSON.stringify(next.body));
      assert.equal(next.body.sessions.length, 1);
      // A session id is still taken as the cursor of the page after it.
      const byId = await t.api("GET", `/v1/sessions?profile=paged-del&limit=2&after=${page.body.sessions[0].id}`);
      assert.deepEqual(byId.body.sessions.map((x: any) => x.id), next.body.sessions.map((x: any) => x.id));
      // Neither a cursor nor a session: a bad request that says what `after` takes, not "session not found".
      const bad = await t.api("GET", "/v1/sessions?after=garbage");
      assert.deepEqual([bad.status, bad.body.error.code], [400, "invalid_cursor"]);
      assert.match(bad.body.error.message, /page cursor \(the previous page's next\)/);
    });

    it("rejects bad input with 4xx JSON errors and writes nothing", async () => {
      const count = async () => (await t.core.storage.db.selectFrom("sessions").select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow()).n;
      const before = await count();
      const cases: Array<[string, string, unknown, number, string]> = [
        ["POST", "/v1/sessions", { profile: "x", extra: 1 }, 400, "invalid_body"],
        ["POST", "/v1/sessions", { profile: 42 }, 400, "invalid_body"],
        ["POST", "/v1/sessions", { profile: "has space" }, 400, "invalid_body"],
        ["POST", "/v1/sessions", { source: { user_id: "u", admin: true } }, 400, "invalid_body"],
        ["POST", "/v1/sessions", { source: { user_id: "x".repeat(300) } }, 400, "invalid_body"],
        ["POST", "/v1/sessions", "{not json", 400, "invalid_json"],
        ["POST", "/v1/sessions", [], 400, "invalid_body"],
        ["POST", "/v1/sessions", { source: [] }, 400, "invalid_body"],
        ["POST", "/v1/sessions", { parent_session_id: "s_missing" }, 422, "parent_not_found"],
        ["GET", "/v1/sessions/bad%20id!", undefined, 400, "invalid_id"],
        ["GET", "/v1/sessions/s_missing", undefined, 404, "not_found"],
        ["GET", "/v1/sessions?limit=abc", undefined, 400, "invalid_query"],
        ["GET", "/v1/sessions?limit=0", undefined, 400, "invalid_query"],
        ["GET", "/v1/sessions?unknown=1", undefined, 400, "invalid_query"],
        ["POST", "/v1/sessions/s_missing/turns", { message: "hi" }, 404, "not_found"],
        ["POST", "/v1/sessions/s_missing/turns", { message: "" }, 400, "invalid_body"],
        ["POST", "/v1/sessions/s_missing/archive", { force: true }, 400, "invalid_body"],
        ["POST", "/v1/sessions/bulk-delete", { ids: "s_1" }, 400, "invalid_body"],
        ["POST", "/v1/sessions/bulk-delete", {}, 400, "invalid_body"],
        ["POST", "/v1/maintenance/everything", {}, 400, "invalid_task"],
        ["POST", "/v1/maintenance/prune", { older_than_days: "1" }, 400, "invalid_body"],
        // Above 0 but selecting every session all the same (an outside probe).
        ["POST", "/v1/maintenance/prune", { older_than_days: 1e-300 }, 400, "invalid_body"],
        ["POST", "/v1/maintenance/prune", { older_than_days: 0.00001 }, 400, "invalid_body"],
        ["POST", "/v1/maintenance/idle_archive", { older_than_days: 0.00001 }, 400, "invalid_body"],
        ["POST", "/v1/commands/Bad!", {}, 400, "invalid_id"],
        ["DELETE", "/v1/sessions", undefined, 405, "method_not_allowed"],
        ["GET", "/v1/nope", undefined, 404, "not_found"],
      ];
      for (const [method, path, body, status, code] of cases) {
        const res = await t.api(method, path, body);
        assert.equal(res.status, status, `${method} ${path} ${JSON.stringify(body)} -> ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error.code, code, `${method} ${path}`);
        assert.equal(typeof res.body.error.message, "string");
      }
      const withIssues = await t.api("POST", "/v1/sessions", { profile: 1 });
      assert.equal(withIssues.body.error.issues[0].path, "profile");
      assert.equal(await count(), before);
    });

    it("describes the hook catalogue and the (empty) plugin set", async () => {
      const hooks = await t.api("GET", "/v1/hooks");
      assert.deepEqual(hooks.body.hooks.map((h: any) => h.hook), HOOK_NAMES);
      const del = hooks.body.hooks.find((h: any) => h.hook === "on_session_delete");
      assert.deepEqual(del.fields, ["session_id", "reason", "profile", "deleted_ids", "sessions_dir"]);
      assert.equal(hooks.body.hooks.find((h: any) => h.hook === "pre_llm_call").returns_used, true);
      assert.deepEqual((await t.api("GET", "/v1/plugins")).body, { plugins: [] });
      assert.equal((await t.api("GET", "/v1/plugins/nothing")).status, 404);
      const missing = await t.api("POST", "/v1/plugins/nothing/enable");
      assert.equal(missing.status, 404);
      // A folder made after the start is not known until a restart (or --watch): the 404 says so.
      assert.match(missing.body.error.message, /^plugin nothing not found: no such folder in .* when it was last read \(at start, and continually under serve --watch\)$/);
      assert.equal((await t.api("POST", "/v1/plugins/nothing/explode")).status, 400);
    });

    // Found by an outside probe: the old session was ended in one transaction and its successor
    // made in another; a database that failed in between left it ended with no successor, and the
    // retry was refused as session_ended.
    it("a reset whose successor cannot be stored changes nothing: the session stays open, a retry resets it", async () => {
      const id = (await t.api("POST", "/v1/sessions", { platform: "cli" })).body.session.id as string;
      const storage = t.core.storage as unknown as { write: (fn: (trx: any) => Promise<unknown>) => Promise<unknown> };
      const real = storage.write;
      // The transaction that inserts a session fails at the insert, as a server that went away does.
      storage.write = (fn) =>
        real.call(t.core.storage, (trx: any) =>
          fn(
            new Proxy(trx, {
              get: (target, key) => {
                if (key === "insertInto") return () => { throw new TypeError("fetch failed"); };
                const value = Reflect.get(target, key);
                return typeof value === "function" ? value.bind(target) : value;
              },
            }),
          ),
        );
      let failed;
      try {
        failed = await t.api("POST", `/v1/sessions/${id}/reset`, {});
      } finally {
        storage.write = real;
      }
      assert.equal(failed.status, 503, JSON.stringify(failed.body));
      assert.equal((await t.api("GET", `/v1/sessions/${id}`)).body.session.ended_at, null, "still open");
      rec.clear();
      const retry = await t.api("POST", `/v1/sessions/${id}/reset`, {});
      assert.equal(retry.status, 201, JSON.stringify(retry.body));
      assert.notEqual(retry.body.session.id, id);
      assert.equal((await t.api("GET", `/v1/sessions/${id}`)).body.session.end_reason, "reset");
      assert.deepEqual(rec.events.map((e) => e.hook), ["on_session_end", "on_session_finalize", "on_session_start", "on_session_reset"]);
    });
  });
}

describe("plugin endpoints over a plugin host", () => {
  let t: TestServer;
  const info = (name: string, status: PluginInfo["status"]): PluginInfo => ({
    name, version: "1.0.0", description: null, hooks: ["post_compaction"], unknown_hooks: [], unknown_fields: [], tools: [], system_prompt: false, commands: [],
    capabilities: { requested: [], granted: [], ungranted: [] }, limits: null, status, reason: status === "active" ? null : "disabled by operator", stats: null,
  });
  before(async () => {
    const state = new Map([["memo", info("memo", "active")]]);
    const host: PluginHost = {
      list: () => [...state.values()],
      get: (n) => state.get(n),
      running: (n) => state.get(n)?.status === "active",
      settled: async () => {},
      promptSections: () => [],
      logs: () => undefined,
      enable: async (n) => {
        if (!state.has(n)) throw new PluginNotFoundError(n);
        state.set(n, info(n, "active"));
        return state.get(n)!;
      },
      disable: async (n) => {
        if (!state.has(n)) throw new PluginNotFoundError(n);
        state.set(n, info(n, "disabled"));
        return state.get(n)!;
      },
      close: async () => {},
    };
    t = await startTestServer({ pluginHost: async () => host });
  });
  after(() => t.close());

  it("lists, shows, disables and enables through core.plugins", async () => {
    assert.deepEqual((await t.api("GET", "/v1/plugins")).body.plugins.map((p: any) => [p.name, p.status]), [["memo", "active"]]);
    assert.equal((await t.api("POST", "/v1/plugins/memo/disable")).body.plugin.status, "disabled");
    assert.equal((await t.api("GET", "/v1/plugins/memo")).body.plugin.reason, "disabled by operator");
    assert.equal((await t.api("POST", "/v1/plugins/memo/enable")).body.plugin.status, "active");
    assert.equal((await t.api("POST", "/v1/plugins/other/enable")).status, 404);
    // A query is refused; the body is pointed at only where it takes options (this one takes none).
    const force = await t.api("POST", "/v1/plugins/memo/enable?force=1");
    assert.deepEqual([force.status, force.body.error.message], [400, 'invalid query: POST /v1/plugins/memo/enable takes no query parameters (got "force")']);
    const turn = await t.api("POST", "/v1/sessions/s_x/turns?stream=1", { message: "hi" });
    assert.match(turn.body.error.message, /takes no query parameters \(got "stream"\); its options go in the JSON body$/);
  });
});

describe("bearer token", () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ env: { HOOKBOX_API_TOKEN: "s3cret" } });
  });
  after(() => t.close());

  it("guards every endpoint", async () => {
    const endpoints: Array<[string, string]> = [
      ["GET", "/v1/health"],
      ["GET", "/v1/sessions"],
      ["POST", "/v1/sessions"],
      ["GET", "/v1/hooks"],
      ["GET", "/v1/plugins"],
      ["POST", "/v1/maintenance/prune"],
      ["POST", "/v1/commands/commands"],
      ["DELETE", "/v1/sessions/s_1"],
      ["GET", "/v1/does-not-exist"],
    ];
    for (const [method, path] of endpoints) {
      assert.equal((await t.api(method, path, undefined, { authorization: "" })).status, 401, `${method} ${path} without token`);
      assert.equal((await t.api(method, path, undefined, { authorization: "Bearer wrong" })).status, 401, `${method} ${path} wrong token`);
    }
    assert.equal((await t.api("GET", "/v1/health")).status, 200);
    assert.equal((await t.api("POST", "/v1/sessions", {})).status, 201);
  });
});
