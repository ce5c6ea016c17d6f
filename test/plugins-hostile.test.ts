// Hostile plugins, built to WASM and loaded by the real runtime: each is stopped by its own limit
// with the right typed failure while the request, the other plugins and the server go on; repeated
// failures quarantine a plugin, visibly and persistently, until an operator re-enables it.
import { databaseEndpoint, refusal } from "../host-api/reserved-endpoints.ts";
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { fetchLimited } from "../host-api/http-fetch.ts";
import { seed } from "./helpers/seed.ts";
import { pluginDir, type PluginDir } from "./helpers/plugin-dir.ts";
import { freePort } from "./helpers/ports.ts";
import { command, newSession, seedLongHistory, pluginInfo, startPluginServer, turn, HOSTILE_DIR, type PluginServer } from "./helpers/plugins.ts";

const EXPECTED: Record<string, string> = {
  loop: "fuel",
  membomb: "memory",
  trap: "trap",
  bigoutput: "bad_output",
  badjson: "bad_output",
  ungranted: "denied",
};
const HOSTILE = Object.keys(EXPECTED);

function hostileConfig(extra: Record<string, unknown> = {}) {
  return {
    dir: HOSTILE_DIR,
    enabled: [...HOSTILE, "counter", "compute"],
    grants: { counter: ["kv"] }, // ungranted requests kv, sessions:read and http: none granted
    limits: { loop: { fuel: 2_000_000 }, membomb: { memory_pages: 32 }, compute: { fuel: 5_000_000 } },
    ...extra,
  };
}

describe("hostile plugins: every limit holds and everyone else goes on", () => {
  let s: PluginServer;
  before(async () => {
    // badwrite (kv granted) also runs here: its refused output must take its KV writes with it.
    s = await startPluginServer(
      hostileConfig({ quarantine_after: 100, enabled: [...HOSTILE, "counter", "compute", "badwrite"], grants: { counter: ["kv"], badwrite: ["kv"] } }),
    );
  });
  after(() => s.close());

  it("a turn, a compaction and a delete all succeed while each hostile plugin fails with its kind", async () => {
    const sid = await newSession(s);
    await seedLongHistory(s, sid);
    const t = await turn(s, sid, "hello");
    assert.match(t.reply, /hello/);
    assert.deepEqual(t.injected, []);
    const c = await s.api("POST", `/v1/sessions/${sid}/compress`, { kind: "summarize" });
    assert.equal(c.body.compacted, true);
    const d = await s.api("DELETE", `/v1/sessions/${c.body.session_id}`);
    assert.equal(d.status, 200);

    for (const [name, kind] of Object.entries(EXPECTED)) {
      const info = await pluginInfo(s, name);
      assert.equal(info.status, "active", name);
      // badjson's garbage and bigoutput's 10 MiB fail only where the return is used (pre_llm_call);
      // the same output from their observer hooks (post_compaction, on_session_delete) is ignored,
      // whatever it is, as the seed says (bigoutput's failed there as bad_output, KV writes dropped).
      const [failed, ok] = name === "badjson" || name === "bigoutput" ? [1, 2] : [3, 0];
      assert.equal(info.stats.failures[kind], failed, `${name}: ${JSON.stringify(info.stats.failures)}`);
      assert.equal(info.stats.ok, ok, name);
    }
    // What its failed calls burned counts in its stats (it stayed at 0: a runaway plugin looked cheap).
    assert.ok((await pluginInfo(s, "loop")).stats.fuel_used >= 3 * 2_000_000);
    const counter = await pluginInfo(s, "counter");
    assert.equal(counter.stats.failures.trap + counter.stats.failures.fuel, 0);
    assert.ok(counter.stats.ok >= 4, `counter saw ${counter.stats.ok} events`); // start, pre/post llm, compaction, delete
    const counts = JSON.parse((await command(s, "counts", {})).body.output);
    assert.ok(counts.post_compaction >= 1 && counts.on_session_delete >= 1, JSON.stringify(counts));
  });

  it("says which grant was missing, per host function", async () => {
    const info = await pluginInfo(s, "ungranted");
    assert.match(info.stats.last_error, /^denied: hookbox_session_messages needs capability "sessions:read"/);
    assert.deepEqual(info.capabilities, { requested: ["kv", "sessions:read", "http:example.com"], granted: [], ungranted: ["kv", "sessions:read", "http:example.com"] });
    const kv = await command(s, "ungranted", { raw_args: "kv" });
    assert.equal(kv.status >= 400, true);
    assert.match(JSON.stringify(kv.body), /denied.*hookbox_kv_set needs capability \\"kv\\"/);
    const http = await command(s, "ungranted", { raw_args: "http" });
    assert.match(JSON.stringify(http.body), /hookbox_http needs capability/);
  });

  it("meters fuel deterministically: the same command costs the same fuel every time", async () => {
    const fuel = async () => (await pluginInfo(s, "compute")).stats.fuel_used as number;
    const f0 = await fuel();
    const a = await command(s, "compute", { raw_args: "1000" });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const f1 = await fuel();
    const b = await command(s, "compute", { raw_args: "1000" });
    const f2 = await fuel();
    assert.equal(a.body.output, b.body.output);
    assert.ok(f1 - f0 > 1000);
    assert.equal(f2 - f1, f1 - f0);
    // Past its budget it is cut off, with the same failure each time.
    const over1 = await command(s, "compute", { raw_args: "100000000" });
    const over2 = await command(s, "compute", { raw_args: "100000000" });
    assert.match(JSON.stringify(over1.body), /fuel.*budget 5000000 units: limits.fuel of its manifest, or the operator.s plugins.limits/);
    assert.deepEqual(over1.body, over2.body);
  });
  it("keeps none of the KV writes of a call whose output was refused", async () => {
    const sid = await newSession(s);
    await turn(s, sid, "hello");
    await s.plugins.flush();
    const rows = await s.core.storage.db.selectFrom("plugin_kv").selectAll().where("plugin", "=", "badwrite").execute();
    assert.deepEqual(rows, []);
    assert.match((await pluginInfo(s, "badwrite")).stats.last_error, /^bad_output: output is not JSON/);
  });
});

describe("quarantine after repeated failures", () => {
  let s: PluginServer;
  before(async () => {
    s = await startPluginServer(hostileConfig({ quarantine_after: 2 }));
  });
  after(() => s.close());

  it("quarantines each hostile plugin, shows why in GET /v1/plugins, keeps serving the rest", async () => {
    const sid = await newSession(s);
    await turn(s, sid, "one");
    await turn(s, sid, "two");
    const { body } = await s.api("GET", "/v1/plugins");
    const byName = Object.fromEntries(body.plugins.map((p: any) => [p.name, p]));
    for (const [name, kind] of Object.entries(EXPECTED)) {
      assert.equal(byName[name].status, "quarantined", name);
      assert.match(byName[name].reason, new RegExp(`quarantined after 2 consecutive failures; last: ${kind}`));
    }
    assert.equal(byName.counter.status, "active");
    const rows = await s.core.storage.db.selectFrom("plugin_state").selectAll().where("quarantined", "is not", null).execute();
    assert.deepEqual(rows.map((r) => r.name).sort(), [...HOSTILE].sort());

    const okBefore = byName.counter.stats.ok;
    const third = await turn(s, sid, "three");
    assert.match(third.reply, /three/);
    assert.equal((await pluginInfo(s, "trap")).stats.calls, 2, "a quarantined plugin is not called");
    assert.equal((await pluginInfo(s, "counter")).stats.ok, okBefore + 2);
  });

  it("a quarantined plugin's command answers 503 plugin_unavailable naming the plugin and why, as the README says", async () => {
    const calls = (await pluginInfo(s, "ungranted")).stats.calls;
    const res = await command(s, "ungranted", { raw_args: "" });
    assert.equal(res.status, 503, JSON.stringify(res.body));
    assert.equal(res.body.error.code, "plugin_unavailable");
    assert.match(res.body.error.message, /\/ungranted is a command of plugin ungranted, which is quarantined \(quarantined after 2 consecutive failures; last: denied/);
    // It says how the operator lifts it (a quarantine stays across restarts until then).
    assert.match(res.body.error.message, /an operator lifts it: the CLI's plugins enable ungranted, or POST \/v1\/plugins\/ungranted\/enable/);
    const info = await pluginInfo(s, "ungranted");
    assert.equal(info.stats.calls, calls, "not called");
    assert.match(info.reason, /an operator lifts it: the CLI's plugins enable ungranted/);
    // What it requests and was granted nothing of was in its log from the load (and in its info).
    assert.deepEqual((await pluginInfo(s, "counter")).capabilities.ungranted, []);
    const logs = (await s.api("GET", "/v1/plugins/ungranted/logs")).body.logs as Array<{ message: string }>;
    assert.ok(logs.some((l) => l.message === "capability kv is requested but not granted (config plugins.grants.ungranted, then restart): host calls that need it fail as denied"));
  });

  it("an operator enable lifts the quarantine (HTTP), and it is persisted", async () => {
    const res = await s.api("POST", "/v1/plugins/loop/enable", {});
    assert.equal(res.status, 200);
    assert.equal(res.body.plugin.status, "active");
    assert.equal(res.body.plugin.stats.consecutive_failures, 0);
    const row = await s.core.storage.db.selectFrom("plugin_state").selectAll().where("name", "=", "loop").executeTakeFirstOrThrow();
    assert.equal(row.quarantined, null);
    assert.equal(row.enabled, 1);
    const off = await s.api("POST", "/v1/plugins/loop/disable", {});
    assert.equal(off.body.plugin.status, "disabled");
    assert.equal(off.body.plugin.reason, "disabled by operator");
    assert.equal((await s.api("POST", "/v1/plugins/nope/enable", {})).status, 404);
  });
});

describe("wall-clock limit", () => {
  let s: PluginServer;
  before(async () => {
    s = await startPluginServer({ dir: HOSTILE_DIR, enabled: ["loop", "counter"], grants: { counter: ["kv"] }, limits: { loop: { fuel: 1e12, timeout_seconds: 0.2 } } });
  });
  after(() => s.close());

  it("stops a loop with fuel to spare at its deadline, then skips it for the cool-off", async () => {
    const sid = await newSession(s);
    await turn(s, sid, "one");
    const loop = await pluginInfo(s, "loop");
    assert.equal(loop.stats.failures.timeout, 1);
    assert.match(loop.stats.last_error, /^timeout: (ran past|did not answer within) its time limit of 200 ms \(limits.timeout_seconds; /, "names the setting");
    await turn(s, sid, "two");
    assert.equal((await pluginInfo(s, "loop")).stats.skipped_cooloff, 1);
    assert.ok((await pluginInfo(s, "counter")).stats.ok >= 4);
  });
});

describe("async host functions (plugin runs in a worker)", () => {
  let s: PluginServer;
  let web: Server;
  let port = 0;
  let dir = "";
  before(async () => {
    web = createServer((req, res) => {
      const big = "x".repeat(2 * 1024 * 1024);
      if (req.url === "/big") return res.end(big); // with a Content-Length
      if (req.url === "/big-gzip") {
        // 2 MiB once inflated, a few KiB on the wire: the declared length is the compressed one.
        const packed = gzipSync(big);
        res.writeHead(200, { "content-encoding": "gzip", "content-length": packed.byteLength });
        return res.end(packed);
      }
      if (req.url === "/big-chunked") {
        for (let i = 0; i < 8; i++) res.write(big.slice(0, big.length / 8)); // chunked: no length
        return res.end();
      }
      if (req.url === "/slow") return void setTimeout(() => res.end("too late"), 8_000).unref(); // past the plugin's 2 s
      if (req.url === "/controls") return res.end("\u0001".repeat(1024 * 1024 - 1024)); // six bytes each in JSON
      if (req.url === "/who") return res.end(`sent by ${req.headers["hookbox-plugin"]}`);
      res.end("hello from the granted host");
    });
    await new Promise<void>((r) => web.listen(0, "127.0.0.1", r));
    port = (web.address() as AddressInfo).port;
    // The built httpsnoop module, with a manifest that requests this test's local host.
    dir = mkdtempSync(join(tmpdir(), "hookbox-plugins-"));
    for (const name of ["httpsnoop", "ungranted"]) {
      mkdirSync(join(dir, name));
      copyFileSync(join(HOSTILE_DIR, name, "plugin.wasm"), join(dir, name, "plugin.wasm"));
      const manifest = JSON.parse(readFileSync(join(HOSTILE_DIR, name, "manifest.json"), "utf8"));
      if (name === "httpsnoop") manifest.capabilities.push(`http:127.0.0.1:${port}`);
      writeFileSync(join(dir, name, "manifest.json"), JSON.stringify(manifest));
    }
    s = await startPluginServer({
      dir,
      enabled: ["httpsnoop", "ungranted"],
      grants: { httpsnoop: [`http:127.0.0.1:${port}`], ungranted: ["sessions:read"] },
      limits: { ungranted: { memory_pages: 8 }, httpsnoop: { timeout_seconds: 2 } }, // 512 KiB
    });
  });
  after(async () => {
    await s.close();
    web.closeAllConnections(); // the plugin's fetch keeps its connection alive
    await new Promise((r) => web.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it("reaches a granted host and is denied any other, before any traffic", async () => {
    const ok = await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}/x` });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.match(ok.body.output, /hello from the granted host/);
    for (const url of ["http://example.com@127.0.0.1:1/", "http://example.com.evil.test/", `http://127.0.0.1:${port + 1}/`]) {
      const denied = await command(s, "httpsnoop", { raw_args: url });
      // The kind survives the trip back from a worker (Node) as it does in-thread (Deno).
      assert.match(JSON.stringify(denied.body), /failed \(denied\): hookbox_http needs capability/, url);
    }
    // Another port of the granted host: the manifest's side is named, with what it does request.
    const otherPort = await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port + 1}/` });
    assert.match(
      otherPort.body.error.message,
      new RegExp(`needs capability "http:127\\.0\\.0\\.1:${port + 1}" or "http:127\\.0\\.0\\.1", which httpsnoop's manifest\\.json does not request; it requests "http:127\\.0\\.0\\.1:${port}"`),
    );
    assert.equal((await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}/again` })).status, 200, "rebuilt after a denial");
  });

  it("names the plugin in every request it makes (Hookbox-Plugin)", async () => {
    const res = await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}/who` });
    assert.match(res.body.output, /sent by httpsnoop/);
  });

  // A hook's deadline comes from the dispatcher's clock with a fraction of a millisecond (after an
  // awaited call in its fan-out), which Node's AbortSignal.timeout refused: such a request trapped
  // ("The value of "delay" is out of range") where a command's went out.
  it("sends a request whose deadline has a fraction of a millisecond, as a hook's may", async () => {
    const answer = await fetchLimited({ method: "GET", url: `http://127.0.0.1:${port}/who` }, "direct", Date.now() + 4_992.955);
    assert.equal(answer.status, 200, JSON.stringify(answer));
    assert.equal(answer.body, "sent by direct");
  });

  it("fails a request the call's time limit cuts off as a timeout, not a trap", async () => {
    const res = await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}/slow` });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.match(JSON.stringify(res.body), /failed \(timeout\)/);
    assert.equal((await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}/small` })).status, 200, "answers again after the timeout");
  });

  // Node only: the plugin runs in a worker there (no JSPI), and the flag is Node's.
  it("a worker keeps the process's --disable-warning: no non-JSON warning line on stderr", { skip: "Deno" in globalThis }, async () => {
    const cli = fileURLToPath(new URL("../runtime/cli.ts", import.meta.url));
    // Not spawnSync: this process's test server must answer the plugin's request meanwhile.
    const run = await promisify(execFile)(process.execPath, ["--disable-warning=ExperimentalWarning", "--import", "tsx", cli, "plugins", "call", "httpsnoop", "command", "httpsnoop", `http://127.0.0.1:${port}/x`], {
      env: { ...process.env, HOOKBOX_PLUGINS_DIR: dir, HOOKBOX_LOG: "warn" },
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.match(run.stdout, /hello from the granted host/);
    assert.doesNotMatch(run.stderr, /ExperimentalWarning/);
  });

  it("refuses a response over 1 MiB, whether its length is declared, compressed or not declared", async () => {
    for (const path of ["/big", "/big-gzip", "/big-chunked"]) {
      const res = await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}${path}` });
      assert.match(JSON.stringify(res.body), /response larger than 1048576 bytes/, path);
    }
    assert.equal((await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}/small` })).status, 200);
  });

  // Found by an outside probe: 1 MiB of control characters became 6 MB of answer per request.
  it("holds a response's JSON to the answer cap: a body within 1 MiB whose escapes pass 4 MiB fails as memory", async () => {
    const res = await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}/controls` });
    assert.match(JSON.stringify(res.body), /\(memory\): hookbox_http: the response's JSON holds \d+ bytes, more than the most one answer may hold/);
    assert.equal((await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}/small` })).status, 200);
  });

  it("fails as memory, before reading them, when the messages it asks for hold more than its memory allowance", async () => {
    // Read and encoded whole first, 1,000 messages of 300 KB held the server's thread for seconds.
    const sid = await newSession(s);
    await seed(s.core, sid, Array.from({ length: 60 }, (_, i) => ["user", `${i} ${"x".repeat(10_000)}`] as [string, string]));
    const res = await command(s, "ungranted", { raw_args: "sessions", session_id: sid });
    assert.match(JSON.stringify(res.body), /\(memory\): the last 100 messages of s_\w+ hold more than 524288 bytes/);
  });

  // Found by an outside probe: the bound was the contents' raw bytes, and 4 MB of control
  // characters made a 24 MB answer (each \u0001 six bytes of JSON) built on the host's thread.
  it("fails as memory, before reading them, when the messages' JSON would pass its memory allowance though their text does not", async () => {
    const sid = await newSession(s);
    await seed(s.core, sid, Array.from({ length: 60 }, (_, i) => ["user", `${i} ${"\u0001".repeat(4_000)}`] as [string, string]));
    const res = await command(s, "ungranted", { raw_args: "sessions", session_id: sid });
    assert.match(JSON.stringify(res.body), /\(memory\): the last 100 messages of s_\w+ hold more than 524288 bytes/);
  });

  it("reads a session's messages with sessions:read", async () => {
    const sid = await newSession(s);
    await seed(s.core, sid, [["user", "remember the milk"]]);
    const res = await command(s, "ungranted", { raw_args: "sessions", session_id: sid });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const kv = await command(s, "ungranted", { raw_args: "kv", session_id: sid });
    assert.match(JSON.stringify(kv.body), /denied/);
  });
});

describe("host work a plugin asks for on its own large KV (kvflood)", () => {
  let s: PluginServer;
  before(async () => {
    // 64 MiB of memory: a host answer is still held to MAX_ANSWER_BYTES (4 MiB), built on the host's thread.
    s = await startPluginServer({ dir: HOSTILE_DIR, enabled: ["kvflood"], grants: { kvflood: ["kv"] }, limits: { kvflood: { memory_pages: 1024 } } });
  });
  after(async () => {
    await s.close();
  });
  const flood = async (args: string) => {
    const res = await command(s, "kvflood", { raw_args: args });
    return { status: res.status, text: JSON.stringify(res.body) };
  };
  const fill = async (count: number) => {
    for (let from = 0; from < count; from += 500) assert.equal((await flood(`fill ${from} ${Math.min(500, count - from)} 480`)).status, 200);
  };
  /** A key is "f:" + 6 digits + ":" + 480 x's: 492 bytes as a JSON string with its comma. */
  const listed = (keys: number) => String(1 + keys * 492);

  it("a key list larger than one answer may hold fails as memory, told before any key is read; a smaller one is listed", async () => {
    // Read and encoded whole first, 100,000 keys of 500 bytes held the server's thread for 1-3 s.
    await fill(9_000);
    const res = await flood("list");
    assert.match(res.text, /\(memory\): kv_list: the keys under \\"f:\\" hold more than 4194304 bytes, the most one answer may hold/);
    assert.equal((await flood("sweep 9000")).text.includes('"output":"[1,8999]"'), true, "counted: the first sweep's key is not counted again");
    await fill(100);
    assert.equal(JSON.parse((await flood("list")).text).output, listed(100));
  });

  // A caller chooses a command's input: five failing calls quarantined a guard plugin for everyone.
  it("commands that fail for their caller's input (a key past 512 bytes) are counted, never quarantine the plugin", async () => {
    const before = (await pluginInfo(s, "kvflood")).stats.failures.trap;
    for (let i = 0; i < 7; i++) {
      const res = await flood("fill 0 1 600");
      assert.equal(res.status, 422);
      assert.match(res.text, /kv key: \d+ bytes, more than the 512/);
    }
    const info = await pluginInfo(s, "kvflood");
    assert.deepEqual([info.status, info.stats.quarantined, info.stats.failures.trap - before], ["active", null, 7]);
    assert.equal((await flood("fill 0 1 5")).status, 200);
  });

  // Decoded to U+FFFD, keys 0xFF and 0xFE were one key (the second write overwrote the first).
  it("a key that is not UTF-8 is refused, not decoded into another plugin key", async () => {
    for (const byte of [0xff, 0xfe, 0x80]) {
      const res = await flood(`binary ${byte}`);
      assert.equal(res.status, 422);
      assert.match(res.text, /kv key: not UTF-8 text/);
    }
    assert.equal((await flood("binary 65")).status, 200, "k + 'A' is text");
  });
});

describe("max_output_bytes raised by the operator", () => {
  let s: PluginServer;
  before(async () => {
    s = await startPluginServer({ dir: HOSTILE_DIR, enabled: ["bigoutput"], limits: { bigoutput: { max_output_bytes: 16 << 20 } } });
  });
  after(() => s.close());

  it("accepts an output within the plugin's own limit, beyond the 64 KiB default", async () => {
    const report = await s.core.dispatcher.emit("post_compaction", {
      session_id: "s_x",
      old_session_id: "",
      kind: "summarize",
      reason: "manual",
      before_tokens: 10,
      after_tokens: 5,
      messages_removed: 2,
    });
    assert.deepEqual(report.failed, []);
    assert.deepEqual(report.delivered, ["bigoutput"]);
  });
});

/** A server running only httpsnoop, requesting and granted `hosts` besides its own (its plugin.wasm stays). */
async function httpsnoopGranted(hosts: string[], db?: "sqld"): Promise<{ s: PluginServer; dir: PluginDir }> {
  const dir = pluginDir([], ["httpsnoop"]);
  const manifest = JSON.parse(readFileSync(join(HOSTILE_DIR, "httpsnoop", "manifest.json"), "utf8"));
  dir.write("httpsnoop", { ...manifest, capabilities: [...manifest.capabilities, ...hosts] });
  const s = await startPluginServer({ dir: dir.path, enabled: ["httpsnoop"], grants: { httpsnoop: hosts } }, db ? { db } : {});
  return { s, dir };
}

// An http: grant of a host hookbox itself listens on (here 127.0.0.1, any port) must not reach its
// API, which needs no token on loopback: found by an outside probe (a plugin listed sessions and
// disabled another plugin through it).
describe("an http: grant does not reach hookbox's own API", () => {
  let s: PluginServer;
  let dir: PluginDir;
  before(async () => {
    ({ s, dir } = await httpsnoopGranted(["http:127.0.0.1"]));
  });
  after(async () => {
    await s.close();
    dir.remove();
  });

  it("answers the plugin's request with 403 on every route; the same request from outside gets 200", async () => {
    await s.api("POST", "/v1/sessions", { platform: "cli" });
    for (const path of ["/v1/sessions?limit=3", "/v1/plugins", "/healthz"]) {
      const res = await command(s, "httpsnoop", { raw_args: `${s.url}${path}` });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.match(res.body.output, /\\"status\\":403/, path);
      assert.match(res.body.output, /does not answer requests plugins make/, path);
      assert.doesNotMatch(res.body.output, /"sessions"|s_[0-9a-f]/, path);
    }
    assert.equal((await s.api("GET", "/v1/sessions?limit=3")).status, 200);
  });

  // A granted service that is down is the network's doing: the plugin gets status 0 and why, its
  // call goes on (it failed as trap, so an outage quarantined plugins that call out).
  it("a request that gets no answer (connection refused) answers status 0 with the error; the call succeeds", async () => {
    const port = await freePort();
    const res = await command(s, "httpsnoop", { raw_args: `http://127.0.0.1:${port}/x` });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.body.output, /\\"status\\":0,\\"body\\":\\"\\",\\"error\\":\\"[^"]*(ECONNREFUSED|refused)/i);
    assert.equal((await pluginInfo(s, "httpsnoop")).stats.consecutive_failures, 0);
  });
});

// sqld answers SQL over HTTP to whoever reaches its port: a plugin granted the host it runs on read
// every session's messages, rewrote other plugins' KV and disabled them (an outside probe). The
// database server is out of reach whatever the grant, by any name or address of this machine.
describe("an http: grant does not reach the database server", () => {
  let s: PluginServer;
  let dir: PluginDir;
  before(async () => {
    ({ s, dir } = await httpsnoopGranted(["http:127.0.0.1", "http:localhost"], "sqld"));
  });
  after(async () => {
    await s.close();
    dir.remove();
  });

  it("refuses a request to the database server's port by address or by any name; other ports of the host stay granted", async () => {
    const db = new URL(s.core.config.db_url);
    const outside = await fetch(`http://127.0.0.1:${db.port}/health`);
    assert.equal(outside.status, 200, "sqld answers anyone who reaches it");
    for (const host of ["127.0.0.1", "localhost", "127.0.0.2"]) {
      const res = await command(s, "httpsnoop", { raw_args: `http://${host}:${db.port}/health` });
      if (host === "127.0.0.2") {
        // Not granted (no http:127.0.0.2): denied by the grant as before.
        assert.match(JSON.stringify(res.body), /needs capability/, host);
        continue;
      }
      assert.notEqual(res.status, 200, `${host}: ${JSON.stringify(res.body)}`);
      assert.match(JSON.stringify(res.body), new RegExp(`${host}:${db.port} is the database server hookbox uses: no plugin may reach it`), host);
      // A name is refused on that port whatever it resolves to now: it could resolve to the server when the request connects.
      if (host === "localhost") assert.match(JSON.stringify(res.body), /a host name may point to it when the request connects/);
    }
    for (const [target, refused] of [
      [`http://[::ffff:7f00:1]:${db.port}/`, true], // 127.0.0.1 as the URL parser writes it mapped to IPv6
      [`http://api.example.invalid:${db.port}/`, true], // any name, whatever it resolves to now
      [`http://api.example.invalid:${Number(db.port) + 1}/`, false],
    ] as const) {
      assert.equal(Boolean(await refusal(new URL(target), databaseEndpoint(s.core.config.db_url)!)), refused, target);
    }
    // Over TLS a name cannot be pointed at the server (its certificate would not match): only its addresses are refused.
    const tls = databaseEndpoint("libsql://127.0.0.1:7443")!;
    assert.equal(Boolean(await refusal(new URL("https://api.example.invalid:7443/"), tls)), false);
    assert.equal(Boolean(await refusal(new URL("https://127.0.0.1:7443/"), tls)), true);
    const port = await freePort();
    const other = await command(s, "httpsnoop", { raw_args: `http://localhost:${port}/x` });
    assert.equal(other.status, 200, JSON.stringify(other.body));
    assert.match(other.body.output, /\\"status\\":0/);
  });
});

