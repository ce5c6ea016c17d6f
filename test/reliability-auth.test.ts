// Auth over real HTTP. With HOOKBOX_API_TOKEN set, every route the app serves (enumerated from the
// app itself, so a new route cannot slip by), unknown routes and odd methods refuse a missing or
// wrong token with 401 before anything runs. Sensitive plugin commands (real WASM plugin) refuse a
// caller without an identity, however the empty identity is spelled.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { createApp } from "../runtime/http/app.ts";
import { ConfigError, parseConfig } from "../runtime/config.ts";
import { runCli } from "../runtime/cli.ts";
import { ROUTE_DOCS } from "../runtime/http/openapi.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { recordHooks, type HookRecorder } from "./helpers/hooks.ts";
import { snapshot } from "./helpers/db-check.ts";
import { command, newSession, pluginInfo, startPluginServer, SEED_DIR, type PluginServer } from "./helpers/plugins.ts";

const TOKEN = "s3cret-token-value";

/** Authorization headers that must all be refused (undefined: no header at all). */
// (A trailing space is not listed: HTTP strips it from header values, so that IS the right token.)
const WRONG: Array<string | undefined> = [
  undefined,
  "",
  "Bearer",
  "Bearer ",
  "Bearer wrong",
  `Bearer ${TOKEN.slice(0, -1)}`,
  `Bearer ${TOKEN}x`,
  `Bearer  ${TOKEN}`,
  TOKEN,
  `Basic ${Buffer.from(`user:${TOKEN}`).toString("base64")}`,
  `Token ${TOKEN}`,
  `Bearer ${TOKEN.toUpperCase()}`,
  `Bearer ${TOKEN}, Bearer ${TOKEN}`,
];

/** A request with exactly the Authorization header given (none when undefined). */
async function raw(url: string, method: string, path: string, body: unknown, auth: string | undefined) {
  const headers: Record<string, string> = body === undefined ? {} : { "content-type": "application/json" };
  if (auth !== undefined) headers.authorization = auth;
  const res = await fetch(url + path, { method, headers, body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body) });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** Probes and API docs answer without a token by design (documented as such in the OpenAPI document). */
const PUBLIC = new Set(Object.entries(ROUTE_DOCS).filter(([, doc]) => doc.public).map(([route]) => route));

describe("reliability: bearer token on every route", () => {
  let t: TestServer;
  let rec: HookRecorder;
  let sid: string;
  before(async () => {
    t = await startTestServer({ env: { HOOKBOX_API_TOKEN: TOKEN }, before: (core) => void (rec = recordHooks(core.dispatcher)) });
    sid = (await t.api("POST", "/v1/sessions", { source: { user_id: "u1" } })).body.session.id;
    await t.api("POST", `/v1/sessions/${sid}/turns`, { message: "hello" });
    rec.clear();
  });
  after(() => t.close());

  /** Every route of the app with its parameters filled in, and a body that would do something. */
  function routes(): Array<{ method: string; path: string; body?: unknown }> {
    const fill = (path: string) =>
      path.replace(":id", sid).replace(":task", "prune").replace(":name", path.startsWith("/v1/commands") ? "exit" : "counter").replace(":action", "disable");
    const bodies: Record<string, unknown> = {
      "POST /v1/sessions": { profile: "intruder" },
      "POST /v1/sessions/bulk-delete": { ids: [sid] },
      "POST /v1/sessions/adopt": { ids: [sid], profile: "intruder" },
      "POST /v1/sessions/:id/turns": { message: "let me in" },
      "POST /v1/maintenance/:task": { older_than_days: 0 },
      "POST /v1/commands/:name": { session_id: sid, raw_args: "--delete" },
    };
    return createApp(t.core)
      .routes.filter((r) => r.method !== "ALL" && !PUBLIC.has(`${r.method} ${r.path}`))
      .map((r) => ({ method: r.method, path: fill(r.path), body: bodies[`${r.method} ${r.path}`] ?? (r.method === "GET" ? undefined : {}) }));
  }

  it("refuses a missing or wrong token on every route, before anything runs", async () => {
    const all = [
      ...routes(),
      { method: "GET", path: "/v1/does-not-exist" },
      { method: "GET", path: "/" },
      { method: "PUT", path: `/v1/sessions/${sid}`, body: {} },
      { method: "PATCH", path: `/v1/sessions/${sid}`, body: {} },
      { method: "OPTIONS", path: "/v1/sessions" },
      { method: "HEAD", path: "/v1/health" },
      { method: "GET", path: `/v1/health?access_token=${TOKEN}` },
      { method: "POST", path: "/v1/sessions", body: "{broken json" },
      { method: "POST", path: "/v1/sessions", body: JSON.stringify({ pad: "x".repeat(5 * 1024 * 1024) }) },
    ];
    assert.ok(all.length >= 30, `only ${all.length} routes`);
    const before = await snapshot(t.core.storage.db);
    const failures: string[] = [];
    let tried = 0;
    for (const r of all) {
      for (const auth of WRONG) {
        const res = await raw(t.url, r.method, r.path, r.body, auth);
        tried++;
        const ok = res.status === 401 && (r.method === "HEAD" || res.body?.error?.code === "unauthorized") && res.headers.get("www-authenticate") === "Bearer";
        if (!ok) failures.push(`${r.method} ${r.path.slice(0, 50)} auth=${JSON.stringify(auth)}: ${res.status} ${JSON.stringify(res.body).slice(0, 80)}`);
      }
    }
    assert.deepEqual(failures, []);
    assert.equal(await snapshot(t.core.storage.db), before, "a refused request changed rows");
    assert.deepEqual(rec.events.map((e) => e.hook), [], "a refused request fired a hook");
    console.log(`# reliability auth: ${tried} unauthenticated requests refused`);
  });

  it("lets the right token through on every route (the guard is not refusing everything)", async () => {
    for (const r of routes()) {
      const res = await t.api(r.method, r.path, r.method === "GET" ? undefined : r.path.includes("/commands/") ? { raw_args: "" } : {});
      assert.notEqual(res.status, 401, `${r.method} ${r.path}`);
      assert.ok(res.status < 500, `${r.method} ${r.path}: ${res.status}`);
    }
    // The scheme's name is case-insensitive (RFC 7235); the token is not.
    for (const scheme of ["bearer", "BEARER", "Bearer"]) {
      assert.equal((await raw(t.url, "GET", "/v1/sessions", undefined, `${scheme} ${TOKEN}`)).status, 200, scheme);
    }
  });
});

/** A request with exactly these headers (node:http: fetch will not send another Host), its status and error code. */
function rawHttp(url: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; code: string | undefined }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, method, path, headers: body === undefined ? headers : { ...headers, "content-length": String(Buffer.byteLength(body)) } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode!, code: text.startsWith("{") ? JSON.parse(text).error?.code : undefined }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("reliability: pages of other sites cannot drive a server on loopback", () => {
  let t: TestServer;
  let rec: HookRecorder;
  before(async () => {
    t = await startTestServer({ before: (core) => void (rec = recordHooks(core.dispatcher)) });
  });
  after(() => t.close());
  const host = () => new URL(t.url).host;

  it("refuses a cross-site POST a browser sends without asking (text/plain, a form), and a DNS-rebound Host, before anything runs", async () => {
    const sid = (await t.api("POST", "/v1/sessions", {})).body.session.id;
    const del = JSON.stringify({ ids: [sid] });
    const refused: Array<[Record<string, string>, string]> = [
      [{ host: host(), origin: "https://evil.example", "content-type": "text/plain;charset=UTF-8" }, "cross_origin"],
      [{ host: host(), origin: "null", "content-type": "application/x-www-form-urlencoded" }, "cross_origin"],
      [{ host: host(), "sec-fetch-site": "cross-site", "content-type": "text/plain" }, "cross_origin"],
      // Another port of the same machine is another origin (a dev server, another local app).
      [{ host: host(), origin: "http://127.0.0.1:1", "sec-fetch-site": "same-site" }, "cross_origin"],
      // Rebinding: the page's own name, resolving to 127.0.0.1, is same-origin to the browser.
      [{ host: "evil.example:" + new URL(t.url).port, origin: "http://evil.example:" + new URL(t.url).port }, "forbidden_host"],
      [{ host: "127.0.0.1.nip.io" }, "forbidden_host"],
    ];
    for (const [headers, code] of refused) {
      assert.deepEqual(await rawHttp(t.url, "POST", "/v1/sessions/bulk-delete", headers, del), { status: 403, code }, JSON.stringify(headers));
    }
    assert.deepEqual(await rawHttp(t.url, "GET", `/v1/sessions/${sid}/messages`, { host: "rebound.example" }), { status: 403, code: "forbidden_host" });
    assert.equal((await t.api("GET", `/v1/sessions/${sid}`)).status, 200, "nothing was deleted");
    assert.equal(rec.of("on_session_delete").length, 0);
  });

  it("answers its own pages, clients that are not browsers, and every loopback name", async () => {
    for (const name of ["localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "[::1]"]) {
      const headers = { host: `${name}:${new URL(t.url).port}` };
      assert.equal((await rawHttp(t.url, "POST", "/v1/sessions", { ...headers, "content-type": "application/json" }, "{}")).status, 201, name);
    }
    const own = { host: host(), origin: t.url, "sec-fetch-site": "same-origin", "content-type": "application/json" };
    assert.equal((await rawHttp(t.url, "POST", "/v1/sessions", own, "{}")).status, 201);
    assert.equal((await rawHttp(t.url, "GET", "/v1/sessions", { host: host(), "sec-fetch-site": "none" })).status, 200);
    // A link from another site to the docs is a navigation (a read another page cannot see).
    assert.equal((await rawHttp(t.url, "GET", "/docs", { host: host(), "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate" })).status, 200);
  });

  it("with a token, answers any Host (behind a proxy, by its name) but still refuses other origins", async () => {
    const s = await startTestServer({ env: { HOOKBOX_API_TOKEN: TOKEN } });
    try {
      const auth = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
      assert.equal((await rawHttp(s.url, "POST", "/v1/sessions", { ...auth, host: "hookbox.internal.example" }, "{}")).status, 201);
      assert.deepEqual(await rawHttp(s.url, "POST", "/v1/sessions", { ...auth, host: "hookbox.internal.example", origin: "https://evil.example" }, "{}"), { status: 403, code: "cross_origin" });
      // Behind a proxy that rewrites Host, the browser's Sec-Fetch-Site says same-origin: taken at its word.
      const proxied = { ...auth, host: "10.0.0.5:8787", origin: "https://hookbox.example", "sec-fetch-site": "same-origin" };
      assert.equal((await rawHttp(s.url, "POST", "/v1/sessions", proxied, "{}")).status, 201);
      assert.deepEqual(await rawHttp(s.url, "POST", "/v1/sessions", { ...proxied, "sec-fetch-site": "cross-site" }, "{}"), { status: 403, code: "cross_origin" });
    } finally {
      await s.close();
    }
  });
});

describe("reliability: binding beyond loopback needs a token", () => {
  it("refuses non-loopback hosts without a token, including names that only look like loopback", () => {
    for (const host of ["0.0.0.0", "::", "192.168.1.2", "example.com", "127.0.0.1.nip.io", "127.evil.example", "localhost.evil.example"]) {
      assert.throws(() => parseConfig({ host }, {}), ConfigError, host);
      assert.throws(() => parseConfig({}, { HOOKBOX_HOST: host }), ConfigError, host);
      assert.throws(() => parseConfig({ host, api_token: "" }, { HOOKBOX_API_TOKEN: "" }), ConfigError, `${host} with an empty token`);
      assert.equal(parseConfig({ host }, { HOOKBOX_API_TOKEN: TOKEN }).host, host);
    }
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1"]) assert.equal(parseConfig({ host }, {}).host, host);
  });

  // Found by an outside probe: " ", "é" or a token with edge spaces passed the config and then
  // matched no header (header values are trimmed and read as Latin-1): every request was 401.
  it("refuses a token that no Authorization header could carry as it is configured", () => {
    for (const token of [" ", " abc", "abc ", "a b", "é", "tab\there"]) {
      assert.throws(() => parseConfig({}, { HOOKBOX_API_TOKEN: token }), /api_token must be visible ASCII characters/, JSON.stringify(token));
    }
    assert.equal(parseConfig({}, { HOOKBOX_API_TOKEN: "Az09-._~+/=!#$%&'*^`|" }).api_token, "Az09-._~+/=!#$%&'*^`|");
  });

  it("refuses `serve --host` beyond loopback without a token, before anything is opened", async () => {
    const err: string[] = [];
    const io = { out: () => {}, err: (l: string) => err.push(l) };
    const config = parseConfig({ db_url: "file::memory:" }, {});
    for (const host of ["0.0.0.0", "::", "127.0.0.1.nip.io"]) {
      err.length = 0;
      assert.equal(await runCli(["serve", "--host", host], io, { config }), 1, host);
      assert.match(err.join("\n"), /binding beyond loopback needs HOOKBOX_API_TOKEN/, host);
    }
    for (const port of ["70000", "1.5"]) assert.equal(await runCli(["serve", "--port", port], io, { config }), 2, port);
  });
});

describe("reliability: sensitive plugin commands need an identity", () => {
  let s: PluginServer;
  const NO_IDENTITY: Array<[string, Record<string, unknown>]> = [
    ["no source", {}],
    ["empty source", { source: {} }],
    ["null user_id", { source: { user_id: null, chat_id: "c" } }],
    ["empty user_id", { source: { user_id: "" } }],
    ["blank user_id", { source: { user_id: "   " } }],
    ["tab user_id", { source: { user_id: "\t\n" } }],
  ];
  before(async () => {
    s = await startPluginServer(
      { dir: SEED_DIR, enabled: ["memory-reinject", "whoami"], grants: { "memory-reinject": ["kv"] }, command_users: {} },
      { env: { HOOKBOX_API_TOKEN: TOKEN } },
    );
  });
  after(() => s.close());

  const state = async () => {
    await s.plugins.flush();
    return snapshot(s.core.storage.db);
  };

  it("refuses /conventions (sensitive) for every empty identity, over the endpoint and in a turn, without calling the plugin", async () => {
    assert.equal((await pluginInfo(s, "memory-reinject")).status, "active");
    const anonymous = (await s.api("POST", "/v1/sessions", { platform: "web" })).body.session.id;
    const blank = (await s.api("POST", "/v1/sessions", { source: { user_id: "  " } })).body.session.id;
    // Identity comes from the session: each empty identity is a session created with it.
    const sessionsOf = await Promise.all(NO_IDENTITY.map(async ([what, body]) => [what, { session_id: (await s.api("POST", "/v1/sessions", body)).body.session.id }] as const));
    const before = await state();
    const calls = (await pluginInfo(s, "memory-reinject")).stats?.calls ?? 0;
    const failures: string[] = [];
    for (const [what, body] of [["no session", {}], ...sessionsOf, ["anonymous session", { session_id: anonymous }], ["blank-user session", { session_id: blank }]] as const) {
      const res = await command(s, "conventions", { ...body, raw_args: "all your base" });
      if (res.status !== 403 || res.body.error?.code !== "forbidden") failures.push(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
    }
    for (const session of [anonymous, blank]) {
      const res = await s.api("POST", `/v1/sessions/${session}/turns`, { message: "/conventions all your base" });
      if (res.status !== 403) failures.push(`turn in ${session}: ${res.status} ${JSON.stringify(res.body)}`);
    }
    assert.deepEqual(failures, []);
    assert.equal(await state(), before, "a refused command changed the plugin's KV");
    assert.equal((await pluginInfo(s, "memory-reinject")).stats?.calls ?? 0, calls, "a refused command reached the plugin");
    // The same command with an identity runs (so the refusals above are about identity).
    const ok = await command(s, "conventions", { session_id: await newSession(s, "ana") });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    // A non-sensitive plugin command runs without one.
    assert.equal((await command(s, "whoami", {})).status, 200);
    // And the token still guards the command endpoint.
    assert.equal((await s.api("POST", "/v1/commands/conventions", { session_id: anonymous }, { authorization: "Bearer nope" })).status, 401);
  });
});

describe("reliability: sensitive commands limited to listed users", () => {
  let s: PluginServer;
  before(async () => {
    s = await startPluginServer({ dir: SEED_DIR, enabled: ["memory-reinject"], grants: { "memory-reinject": ["kv"] }, command_users: { conventions: ["ana"] } });
  });
  after(() => s.close());

  it("runs for a listed user only", async () => {
    const bob = await newSession(s, "bob");
    assert.equal((await command(s, "conventions", { session_id: bob, raw_args: "bob was here" })).status, 403);
    assert.equal((await command(s, "conventions", { session_id: await newSession(s, "ana ") })).status, 403);
    // An anonymous session cannot borrow ana's identity through the body (the seed's bypass).
    const anon = (await s.api("POST", "/v1/sessions", {})).body.session.id;
    const forged = await command(s, "conventions", { session_id: anon, source: { user_id: "ana" }, platform: "telegram", raw_args: "not ana" });
    assert.equal(forged.status, 400, JSON.stringify(forged.body));
    const ana = await command(s, "conventions", { session_id: await newSession(s, "ana"), raw_args: "ana rules" });
    assert.equal(ana.status, 200);
    assert.match(ana.body.output, /ana rules/);
  });
});
