// Operations over real HTTP: probes without a token, Prometheus metrics (parsed), request ids and the
// access log, the OpenAPI document (validated, and the same routes as the app), the offline docs
// page, 405 for a wrong method, unknown fields named, Idempotency-Key expiry.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { Validator } from "@seriousme/openapi-schema-validator";
import { createApp } from "../runtime/http/app.ts";
import { log, setLogLevel } from "../runtime/log.ts";
import { parseExposition } from "./helpers/prometheus.ts";
import { startPluginServer, SEED_DIR, newSession, turn, type PluginServer } from "./helpers/plugins.ts";
import { startTestServer } from "./helpers/server.ts";
import { loseAnswerOnce } from "./helpers/lost-answer.ts";

const TOKEN = "ops-test-token";

describe("operations endpoints", () => {
  let s: PluginServer;
  let clock = Date.UTC(2030, 0, 1);
  before(async () => {
    s = await startPluginServer(
      { dir: SEED_DIR, enabled: ["whoami", "sidecar-index"], grants: { "sidecar-index": ["kv"] } },
      { config: { api_token: TOKEN, idempotency_ttl_seconds: 60 }, now: () => clock },
    );
  });
  after(() => s.close());
  const raw = (path: string, init: RequestInit = {}) => fetch(s.url + path, init);

  it("answers /healthz and /readyz without a token; everything else wants it", async () => {
    const live = await raw("/healthz");
    assert.equal(live.status, 200);
    assert.equal((await live.json()).ok, true);
    const ready = await raw("/readyz");
    assert.equal(ready.status, 200);
    const body = await ready.json();
    assert.deepEqual(body.checks, { database: "ok", plugins: "ok" });
    assert.equal(body.plugins.active, 2);
    for (const path of ["/metrics", "/v1/health", "/v1/sessions"]) {
      const res = await raw(path);
      assert.equal(res.status, 401, path);
      await res.body?.cancel();
    }
  });

  it("serves Prometheus metrics: requests by route and status, hook calls, fuel, latency, KV size", async () => {
    const sid = await newSession(s);
    await turn(s, sid, "remember this");
    await s.api("GET", "/v1/sessions/nope!");
    const res = await raw("/metrics", { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/, String(res.headers.get("content-type")));
    const m = parseExposition(await res.text());
    const value = (name: string, labels: Record<string, string>) => m.value(name, labels);
    assert.equal(m.types.get("hookbox_http_requests_total"), "counter");
    assert.equal(value("hookbox_http_requests_total", { method: "POST", route: "/v1/sessions/:id/turns", status: "200" }), 1);
    assert.equal(value("hookbox_http_requests_total", { method: "GET", route: "/v1/sessions/:id", status: "400" }), 1);
    assert.ok(value("hookbox_http_requests_total", { method: "GET", route: "/metrics", status: "401" }) >= 1, "a guard's answer counts under its route");
    assert.equal(m.types.get("hookbox_http_request_duration_seconds"), "histogram");
    const turns = { method: "POST", route: "/v1/sessions/:id/turns" };
    assert.equal(value("hookbox_http_request_duration_seconds_count", turns), 1);
    assert.equal(value("hookbox_http_request_duration_seconds_bucket", { ...turns, le: "+Inf" }), 1);
    assert.ok(value("hookbox_http_request_duration_seconds_sum", turns) > 0);
    assert.ok(value("hookbox_plugin_hook_calls_total", { plugin: "sidecar-index" }) >= 2, "session start + turn hooks");
    // Per hook: one on_session_start for the one session this test made, counted with its latency.
    const start = { plugin: "sidecar-index", hook: "on_session_start" };
    assert.equal(value("hookbox_hook_calls_total", { ...start, outcome: "ok" }), 1);
    assert.equal(m.types.get("hookbox_hook_call_duration_seconds"), "histogram");
    assert.equal(value("hookbox_hook_call_duration_seconds_count", start), 1);
    assert.equal(value("hookbox_hook_call_duration_seconds_bucket", { ...start, le: "+Inf" }), 1);
    assert.equal(value("hookbox_plugin_hook_failures_total", { plugin: "sidecar-index", kind: "trap" }), 0);
    assert.ok(value("hookbox_plugin_fuel_used_total", { plugin: "sidecar-index" }) > 0);
    assert.ok(value("hookbox_plugin_hook_latency_seconds", { plugin: "sidecar-index", quantile: "0.99" }) >= 0);
    assert.equal(value("hookbox_plugin_status", { plugin: "sidecar-index", status: "active" }), 1);
    assert.equal(value("hookbox_plugins_quarantined", {}), 0);
    assert.equal(value("hookbox_build_info", {}), 1);
    // A quarantine shows (through the dispatcher's public API, as an operator's tooling would see it).
    s.core.dispatcher.quarantine("whoami", "test quarantine");
    try {
      const q = parseExposition(await (await raw("/metrics", { headers: { authorization: `Bearer ${TOKEN}` } })).text());
      assert.equal(q.value("hookbox_plugins_quarantined"), 1);
      assert.equal(q.value("hookbox_plugin_hook_quarantined", { plugin: "whoami", hook: "*" }), 1);
      assert.equal(q.value("hookbox_plugin_status", { plugin: "whoami", status: "quarantined" }), 1);
    } finally {
      s.core.dispatcher.release("whoami");
    }
    const kv = await s.core.storage.db.selectFrom("plugin_kv").select(["key", "value"]).where("plugin", "=", "sidecar-index").execute();
    assert.ok(kv.length > 0, "sidecar-index wrote KV");
    assert.equal(value("hookbox_plugin_kv_keys", { plugin: "sidecar-index" }), kv.length);
    assert.equal(value("hookbox_plugin_kv_bytes", { plugin: "sidecar-index" }), kv.reduce((n, r) => n + r.key.length + r.value.length, 0));
  });

  it("gives every response a request id and writes one structured access-log line", async () => {
    const lines: string[] = [];
    const write = process.stderr.write;
    setLogLevel("info");
    process.stderr.write = ((chunk: string) => (lines.push(String(chunk)), true)) as typeof process.stderr.write;
    try {
      const mine = await s.api("GET", "/v1/sessions?limit=1", undefined, { "x-request-id": "req-abc-123" });
      assert.equal(mine.headers.get("x-request-id"), "req-abc-123");
      const fresh = await s.api("GET", "/v1/hooks");
      assert.match(fresh.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
    } finally {
      process.stderr.write = write;
      setLogLevel("silent");
    }
    const entry = lines.map((l) => JSON.parse(l)).find((e) => e.msg === "request" && e.request_id === "req-abc-123");
    assert.ok(entry, lines.join(""));
    assert.deepEqual({ method: entry.method, route: entry.route, status: entry.status, path: entry.path }, { method: "GET", route: "/v1/sessions", status: 200, path: "/v1/sessions" });
    assert.equal(typeof entry.ms, "number");
  });

  // Found by an outside probe: a plugin's log line or error with U+009B (a terminal's CSI), U+202E
  // or U+2028 reached stderr raw (JSON.stringify escapes C0 controls only).
  it("writes log lines whose characters that act on a terminal are escaped, and that parse back to the same text", () => {
    const lines: string[] = [];
    const write = process.stderr.write;
    setLogLevel("info");
    process.stderr.write = ((chunk: string) => (lines.push(String(chunk)), true)) as typeof process.stderr.write;
    const text = "a\u009b2Jb\u202ec\u2028d\u0085e\u001b[31mf\u007f";
    try {
      log("info", "plugin log", { plugin: "p", line: text });
    } finally {
      process.stderr.write = write;
      setLogLevel("silent");
    }
    assert.equal(lines.length, 1);
    assert.doesNotMatch(lines[0]!.slice(0, -1), /[\u0000-\u001f\u007f-\u009f\u202e\u2028]/);
    assert.equal(JSON.parse(lines[0]!).line, text);
  });

  it("publishes a valid OpenAPI 3.1 document with exactly the app's routes and the validating schemas", async () => {
    const res = await raw("/openapi.json");
    assert.equal(res.status, 200);
    const doc = await res.json();
    const validator = new Validator();
    const result = await validator.validate(doc);
    assert.equal(result.valid, true, JSON.stringify(result.errors));
    assert.equal(validator.version, "3.1");
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    const app = createApp(s.core);
    const served = [...new Set(app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path.replace(/:([A-Za-z_]+)/g, "{$1}")}`))].sort();
    assert.deepEqual(documented, served);
    const create = doc.paths["/v1/sessions"].post.requestBody.content["application/json"].schema;
    assert.equal(create.additionalProperties, false);
    assert.deepEqual(Object.keys(create.properties).sort(), ["parent_session_id", "platform", "profile", "source"]);
    assert.deepEqual(Object.keys(create.properties.source.properties).sort(), ["chat_id", "thread_id", "user_id"]);
    const list = doc.paths["/v1/sessions"].get.parameters.map((p: any) => `${p.in}:${p.name}`).sort();
    assert.deepEqual(list, ["query:after", "query:archived", "query:limit", "query:profile"]);
    // What the server enforces beyond the shape: a query number's range, a body's "exactly one of".
    assert.equal(doc.paths["/v1/sessions"].get.parameters.find((p: any) => p.name === "limit").schema.description, "a whole number from 1 to 1000");
    assert.equal(doc.paths["/v1/sessions/bulk-delete"].post.requestBody.content["application/json"].schema.description, "exactly one of ids or profile");
    assert.deepEqual(doc.paths["/healthz"].get.security, [], "probes need no token");
    // Every JSON answer is described (and the suites check each one they receive against it).
    const untyped = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => JSON.stringify((Object.values(op.responses) as any[]).find((r) => r.description.startsWith("OK"))?.content?.["application/json"]?.schema) === '{"type":"object"}')
        .map(([m]) => `${m} ${path}`),
    );
    assert.deepEqual(untyped, []);
    assert.equal(doc.paths["/v1/sessions/{id}"].get.responses["200"].content["application/json"].schema.properties.session.$ref, "#/components/schemas/Session");
    assert.deepEqual(doc.components.schemas.Session.required.slice(0, 3), ["id", "profile", "platform"]);
    // A turn may stream; every POST and DELETE may carry an Idempotency-Key.
    const turn = doc.paths["/v1/sessions/{id}/turns"].post;
    assert.deepEqual(Object.keys(turn.responses["200"].content).sort(), ["application/json", "text/event-stream"]);
    // Found by an outside probe: 502 and 503 answers were not in the spec.
    assert.match(turn.responses["5XX"].description, /502 provider_error/);
    assert.equal(turn.responses["5XX"].content["application/json"].schema.$ref, "#/components/schemas/Error");
    assert.ok(turn.parameters.some((p: any) => p.in === "header" && p.name === "Idempotency-Key"));
    assert.ok(!doc.paths["/v1/sessions"].get.parameters.some((p: any) => p.name === "Idempotency-Key"), "not on a GET");
    assert.deepEqual(doc.security, [{ bearer: [] }]);
    // A bound the server checks is in the document (older_than_days: at least an hour, 1/24 day).
    const maintenance = JSON.stringify(doc.paths["/v1/maintenance/{task}"].post);
    assert.match(maintenance, /"older_than_days":\{[^}]*"minimum":0\.0416/); // at least an hour
  });

  it("serves the docs page with its assets from npm (nothing from the internet)", async () => {
    const page = await raw("/docs");
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.doesNotMatch(html, /https?:\/\//, "no absolute URL: everything is served here");
    for (const src of html.match(/(?:src|href)="([^"]+)"/g)!.map((m) => m.split('"')[1]!)) {
      const asset = await raw(src);
      assert.equal(asset.status, 200, src);
      assert.ok((await asset.text()).length > 10_000, src);
    }
    assert.equal((await raw("/docs/package.json")).status, 404);
    // Names of members every object inherits were taken for assets, then read from disk: a 500.
    for (const name of ["constructor", "toString", "valueOf", "hasOwnProperty", "__proto__"]) assert.equal((await raw(`/docs/${name}`)).status, 404, name);
  });

  it("answers 405 with Allow for a known path with a wrong method", async () => {
    for (const [method, path, allow] of [
      ["PUT", "/v1/sessions", "GET, HEAD, POST"],
      ["GET", "/v1/sessions/s_1/turns", "POST"],
      ["POST", "/healthz", "GET, HEAD"],
      // Actions, not session ids: not a GET or DELETE of a session named "bulk-delete".
      ["GET", "/v1/sessions/bulk-delete", "POST"],
      ["DELETE", "/v1/sessions/adopt", "POST"],
    ] as const) {
      const res = await s.api(method, path);
      assert.equal(res.status, 405, `${method} ${path}`);
      assert.equal(res.headers.get("allow"), allow);
      assert.equal(res.body.error.code, "method_not_allowed");
    }
    assert.equal((await s.api("GET", "/v1/nothing-here")).status, 404);
  });

  it("names an unknown body field and suggests the right one", async () => {
    const res = await s.api("POST", "/v1/sessions", { profle: "work" });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.message, 'invalid body: profle: unknown field "profle" (did you mean profile?); allowed: profile, platform, source, parent_session_id');
    assert.deepEqual(res.body.error.issues[0].path, "profle");
    const nested = await s.api("POST", "/v1/sessions", { source: { user: "x" } });
    assert.match(nested.body.error.message, /source\.user: unknown field "user" \(did you mean user_id\?\)/);
    // Fields a body may never carry (a command's caller identity comes from its session) are not offered.
    const cmd = await s.api("POST", "/v1/commands/help", { args: "x" });
    assert.equal(cmd.body.error.message, 'invalid body: args: unknown field "args"; allowed: raw_args, session_id');
    assert.match((await s.api("POST", "/v1/commands/help", { platform: "x" })).body.error.message, /identity comes from the session/);
  });

  it("enables and disables of one plugin sent at once leave it started once, or stopped", async () => {
    const sid = await newSession(s, "ops-concurrent");
    const run = () => s.api("POST", "/v1/commands/whoami", { session_id: sid });
    for (let round = 0; round < 3; round++) {
      assert.equal((await s.api("POST", "/v1/plugins/whoami/disable", {})).status, 200);
      const answers = await Promise.all(Array.from({ length: 4 }, () => s.api("POST", "/v1/plugins/whoami/enable", {})));
      assert.deepEqual(answers.map((r) => r.status), [200, 200, 200, 200]);
      assert.equal((await run()).status, 200, "its command runs: one instance claims it, not two");
      const mixed = await Promise.all([s.api("POST", "/v1/plugins/whoami/disable", {}), s.api("POST", "/v1/plugins/whoami/enable", {})]);
      assert.equal(mixed[1]!.body.plugin.status, "active", "the later request wins");
      assert.equal((await run()).status, 200);
    }
  });

  it("suggests the nearest plugin for a misspelt name", async () => {
    for (const [method, path] of [["GET", "/v1/plugins/whoam"], ["POST", "/v1/plugins/sidecar-indx/disable"]] as const) {
      const res = await s.api(method, path);
      assert.equal(res.status, 404, path);
      assert.match(res.body.error.message, /not found \(did you mean (whoami|sidecar-index)\?\)$/, path);
    }
  });

  it("forgets an Idempotency-Key after idempotency_ttl_seconds", async () => {
    const key = { "idempotency-key": "ttl-key-1" };
    const first = await s.api("POST", "/v1/sessions", { profile: "a" }, key);
    assert.equal(first.status, 201);
    const replay = await s.api("POST", "/v1/sessions", { profile: "a" }, key);
    assert.equal(replay.headers.get("idempotent-replay"), "true");
    assert.equal(replay.body.session.id, first.body.session.id);
    assert.equal((await s.api("POST", "/v1/sessions", { profile: "b" }, key)).status, 422, "reused within the TTL");
    clock += 61_000;
    const again = await s.api("POST", "/v1/sessions", { profile: "b" }, key);
    assert.equal(again.status, 201, "expired: the key is free");
    assert.notEqual(again.body.session.id, first.body.session.id);
    assert.equal((await s.api("POST", "/v1/sessions", { profile: "b" }, key)).body.session.id, again.body.session.id, "and replays the new answer");
  });

  // An outside multi-node probe: the claim committed on sqld, its answer was lost, the client got a
  // 503 "retry", and every retry waited 60 s for a 409 until the claim went stale 10 minutes later.
  it("a claim whose commit answer was lost is given back: the retry runs the request", async () => {
    const lost = loseAnswerOnce(s.core.storage, "write"); // the request's first write: its claim
    try {
      const key = { "idempotency-key": "lost-claim-1" };
      const first = await s.api("POST", "/v1/sessions", { profile: "lost" }, key);
      assert.equal(first.status, 503, JSON.stringify(first.body));
      const t0 = Date.now();
      const retry = await s.api("POST", "/v1/sessions", { profile: "lost" }, key);
      assert.equal(retry.status, 201, JSON.stringify(retry.body));
      assert.ok(Date.now() - t0 < 10_000, "the retry did not wait for the claim");
      assert.equal(lost.lost, true);
    } finally {
      lost.restore();
    }
  });
});

describe("readiness", () => {
  it("answers 503 naming the failing check: plugins not loaded, database unreachable", async () => {
    const t = await startTestServer(); // a core without the plugin runtime
    try {
      const res = await fetch(`${t.url}/readyz`);
      assert.equal(res.status, 503);
      assert.deepEqual((await res.json()).checks, { database: "ok", plugins: "not loaded" });
      await t.core.storage.close();
      const down = await (await fetch(`${t.url}/readyz`)).json();
      assert.equal(down.ready, false);
      assert.match(down.checks.database, /^unreachable: /);
      assert.equal((await fetch(`${t.url}/healthz`)).status, 200, "liveness does not depend on the database");
    } finally {
      await t.close().catch(() => {});
    }
  });
});
