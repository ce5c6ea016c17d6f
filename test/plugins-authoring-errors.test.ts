// Plugin errors name their cause: a misspelt hook or capability gets a suggestion; a thrown error's
// message, a non-zero return and a forgotten beginCall() each say so (not "unreachable" or an
// intermittent "memory limit reached"); every failed call lands in the plugin's log ring, served by
// GET /v1/plugins/:name/logs.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import type { CallContext } from "@extism/extism";
import { CAPABILITY_PATTERN, deny, grantedOf } from "../host-api/capabilities.ts";
import { bindHostApi } from "../host-api/functions.ts";
import { PluginKv } from "../host-api/kv.ts";
import type { PluginCallError } from "../hooks/failures.ts";
import { runCli } from "../runtime/cli.ts";
import { parseConfig } from "../runtime/config.ts";
import { parseManifest } from "../runtime/plugins/manifest.ts";
import { ToolRegistry, uncheckedKeywords } from "../runtime/tools/registry.ts";
import { Buffer } from "node:buffer";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { command, startPluginServer, HOSTILE_DIR, type PluginServer } from "./helpers/plugins.ts";
import { pluginDir, type PluginDir } from "./helpers/plugin-dir.ts";

describe("plugin errors name their cause", () => {
  it("a misspelt capability in manifest.json says which and suggests the right one", () => {
    assert.throws(
      () => parseManifest({ name: "x", version: "1", capabilities: ["KV", "sessions:reed"] }, "manifest.json"),
      (err: Error) => {
        assert.match(err.message, /capabilities\.0: unknown capability "KV" \(did you mean kv\?\)/);
        assert.match(err.message, /capabilities\.1: unknown capability "sessions:reed" \(did you mean sessions:read\?\)/);
        return true;
      },
    );
  });

  it("a misspelt key in manifest.json is reported with a suggestion, not dropped silently", () => {
    const m = parseManifest({ name: "x", version: "1", capabilites: ["kv"], author: "me" }, "manifest.json");
    assert.deepEqual(m.unknown_fields, ["capabilites (did you mean capabilities?)", "author"]);
    assert.deepEqual(m.capabilities, [], "ignored: it requests nothing");
    assert.deepEqual(parseManifest({ $schema: "https://example.com/m.json", "x-author": "me", name: "x", version: "1" }, "manifest.json").unknown_fields, [], "annotations are not reported");
    // Names every object has: no plugin, command or tool may take one (config lookups would miss them).
    assert.throws(() => parseManifest({ name: "constructor", version: "1" }, "manifest.json"), /"constructor" cannot name a plugin/);
    assert.throws(() => parseManifest({ name: "x", version: "1", commands: [{ name: "constructor", description: "d" }] }, "manifest.json"), /"constructor" cannot name a command/);
    assert.throws(() => parseManifest({ name: "x", version: "1", tools: [{ name: "prototype", description: "d", parameters: { type: "object" } }] }, "manifest.json"), /"prototype" cannot name a tool/);
  });

  // Found by an outside probe: "sensitiv": true loaded as an ordinary command anyone could run.
  it("a misspelt key in a command or tool entry fails the load with a suggestion; x- annotations pass", () => {
    assert.throws(
      () => parseManifest({ name: "x", version: "1", commands: [{ name: "wipe", description: "d", sensitiv: true }] }, "manifest.json"),
      /commands\.0\.sensitiv: unknown field "sensitiv" \(did you mean sensitive\?\)/,
    );
    assert.throws(
      () => parseManifest({ name: "x", version: "1", tools: [{ name: "t", descripton: "d", parameters: { type: "object" } }] }, "manifest.json"),
      /tools\.0\.descripton: unknown field "descripton" \(did you mean description\?\)/,
    );
    const m = parseManifest(
      { name: "x", version: "1", commands: [{ name: "wipe", sensitive: true, "x-usage": "/wipe" }], tools: [{ name: "t", description: "d", parameters: { type: "object" }, $schema: "s" }] },
      "manifest.json",
    );
    assert.deepEqual([m.commands[0]!.sensitive, m.tools[0]!.name], [true, "t"]);
  });

  // Found by an outside probe: a command declared twice loaded as active, then was refused as
  // "claimed by plugins counter and counter" on every call.
  it("a command, tool or hook declared twice in manifest.json is refused at load, naming it", () => {
    const d = { description: "d" };
    assert.throws(() => parseManifest({ name: "x", version: "1", commands: [{ name: "counts", ...d }, { name: "counts", ...d }] }, "manifest.json"), /manifest\.json: commands: "counts" is declared twice/);
    const tool = { name: "t", description: "d", parameters: { type: "object" } };
    assert.throws(() => parseManifest({ name: "x", version: "1", tools: [tool, tool] }, "manifest.json"), /tools: "t" is declared twice/);
    assert.throws(() => parseManifest({ name: "x", version: "1", hooks: ["post_compaction", "post_compaction"] }, "manifest.json"), /hooks: "post_compaction" is declared twice/);
    assert.deepEqual(parseManifest({ name: "x", version: "1", commands: [{ name: "a", ...d }, { name: "b", ...d }] }, "manifest.json").commands.map((c) => c.name), ["a", "b"]);
  });

  it("a tool schema whose check has no bound on the host's work: $ref refused, pattern, format and uniqueItems not checked by the host", async () => {
    const tool = (parameters: object) => ({ name: "x", version: "1", tools: [{ name: "t", description: "d", parameters }] });
    const refused = (parameters: object, why: RegExp) => assert.throws(() => parseManifest(tool(parameters), "manifest.json"), why);
    // 40 levels of allOf over $ref: 2^40 steps to check {} at load (a folder not even enabled kept a server from starting).
    const defs: Record<string, object> = { a40: { type: "object" } };
    for (let i = 0; i < 40; i++) defs[`a${i}`] = { allOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
    const started = performance.now();
    refused({ type: "object", $defs: defs, allOf: [{ $ref: "#/$defs/a0" }] }, /"\$ref" .* is not allowed/);
    assert.ok(performance.now() - started < 1_000, "refused without checking it");
    refused({ type: "object", patternProperties: { "^(a+)+$": { type: "string" } } }, /"patternProperties"/);
    // JSON.parse makes "__proto__" an own key, which a validator reads as the prototype: refused
    // keywords hid there (4.5 s of the server's thread per check; an independent review).
    refused(JSON.parse('{"type":"object","__proto__":{"patternProperties":{"^(a|a)*$":{"type":"string"}}}}'), /"__proto__" \(at #\) is not allowed/);
    refused(JSON.parse('{"type":"object","properties":{"p":{"type":"object","__proto__":{"$ref":"#"}}}}'), /"__proto__" \(at #\/properties\/p\) is not allowed/);
    refused(JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"}}}'), /"__proto__" \(at #\/properties\) is not allowed/);
    let deep: object = { type: "object" };
    for (let i = 0; i < 40; i++) deep = { type: "object", properties: { n: deep } };
    refused(deep, /nested deeper than 32 levels/);
    // Compiled by the validator, then refused by a provider that checks the tools: every turn failed.
    refused({ type: "object", properties: { x: { type: "nonsense" } } }, /"type" \(at #\/properties\/x\) must be one of object, array, string/);
    refused({ type: "object", properties: { x: { type: ["string", "string"] } } }, /"type" \(at #\/properties\/x\)/);
    refused({ type: "object", properties: { x: { type: [] } } }, /"type" \(at #\/properties\/x\)/);
    assert.ok(parseManifest(tool({ type: "object", properties: { x: { type: ["string", "null"] }, n: { type: "integer" }, type: { type: "string", default: { type: "any" } } } }), "manifest.json"));
    // A backtracking pattern (^(a+)+$ on "aaaa...!") held the thread for a minute per call through
    // pre_tool_call's rewritten arguments: the tool loads, the model sees the pattern, the host does
    // not run it (the plugin gets the arguments and checks them).
    // The validator's "url" format is such a regex too: 40 a's took hours (found by an outside probe).
    const evil = {
      type: "object",
      properties: { s: { type: "string", pattern: "^(a+)+$" }, xs: { type: "array", uniqueItems: true }, u: { type: "string", format: "url" } },
    };
    const [spec] = parseManifest(tool(evil), "manifest.json").tools;
    assert.deepEqual(uncheckedKeywords(spec!.parameters), ['"pattern" at #/properties/s', '"uniqueItems" at #/properties/xs', '"format" at #/properties/u']);
    const registry = new ToolRegistry();
    registry.register({ spec: spec!, plugin: "x", run: () => "" });
    const t0 = performance.now();
    assert.equal(await registry.check("t", { s: `${"a".repeat(40)}!`, xs: Array.from({ length: 20_000 }, () => 1), u: `http://${"a".repeat(40)}!` }), null);
    assert.ok(performance.now() - t0 < 1_000, "checked without running the pattern or comparing every pair");
    assert.match((await registry.check("t", { s: 5 })) ?? "", /string/, "the rest of the schema is checked");
    // A property may be called "pattern": only keywords count.
    assert.deepEqual(uncheckedKeywords({ type: "object", properties: { pattern: { type: "string" } } }), []);
  });

  it("a plugin tool's argument check runs off the server's thread and is refused past its time (outside probes: 16-25 s, then out of heap)", async () => {
    const registry = new ToolRegistry();
    const tool = (name: string, parameters: object) => {
      const [spec] = parseManifest({ name: "x", version: "1", tools: [{ name, description: "d", parameters }] }, "manifest.json").tools;
      registry.register({ spec: spec!, plugin: "x", run: () => "" });
    };
    const many = <T,>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));
    const args = (n: number, value: unknown) => Object.fromEntries(many(n, (i) => [`k${i}`, value] as const));
    // Schemas within every load limit, each costly per argument value in its own way.
    tool("anyof", { type: "object", additionalProperties: { anyOf: many(1_998, () => ({ type: "string" })) } });
    tool("allof", { type: "object", allOf: many(999, () => ({ additionalProperties: { type: "string" } })) });
    tool("required", { type: "object", additionalProperties: { type: "object", required: many(6_500, (i) => `r${i}`) } });
    tool("deps", { type: "object", additionalProperties: { type: "object", dependencies: { a: many(12_000, () => "b") } } });
    tool("keys", { type: "object", allOf: many(1_990, () => 0) });
    // The server's thread keeps turning meanwhile (a tick every 5 ms).
    let longest = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      longest = Math.max(longest, performance.now() - last);
      last = performance.now();
    }, 5);
    try {
      for (const [name, value, n] of [["anyof", 0, 5_000], ["allof", 0, 8_000], ["required", {}, 9_990], ["deps", { a: 1 }, 1_000], ["keys", 0, 7_000]] as const) {
        const t0 = performance.now();
        assert.match((await registry.check(name, args(n, value))) ?? "", /took longer than 250 ms: refused/, name);
        assert.ok(performance.now() - t0 < 5_000, `${name}: ended at its time`);
      }
    } finally {
      clearInterval(ticker);
    }
    // One such check held it 16-25 s; a new check thread takes ~100 ms of it on Deno (a worker is made there).
    assert.ok(longest < 1_000, `the event loop stalled ${longest.toFixed(0)} ms`);
    // A schema whose check ran out of time is refused unchecked for a while: no thread spent again.
    const t0 = performance.now();
    assert.match((await registry.check("allof", args(1, "s"))) ?? "", /took longer than 250 ms; its checks are refused unchecked until/);
    assert.ok(performance.now() - t0 < 100);
    // Other tools: checked (the thread started again), and what fails is told once (2,000 branches fail alike).
    tool("small", { type: "object", additionalProperties: { anyOf: many(1_998, () => ({ type: "string" })) } });
    tool("keys2", { type: "object", allOf: many(1_990, () => 0) });
    assert.equal(await registry.check("small", args(3, "s")), null);
    assert.equal(await registry.check("small", args(1, 0)), '#/k0: Instance type "number" is invalid. Expected "string".');
    // 1e999 parses as Infinity: a "number" the tool would get as null.
    assert.match((await registry.check("small", JSON.parse('{"xs":[1,1e999]}'))) ?? "", /beyond what JSON can carry/);
    // Checks queued behind one that runs out of time are not refused with it (one at a time in the thread).
    const queued = await Promise.all([registry.check("keys2", args(7_000, 0)), ...many(5, () => registry.check("small", args(2, "s")))]);
    assert.match(queued[0] ?? "", /took longer than 250 ms: refused/);
    assert.deepEqual(queued.slice(1), many(5, () => null));
    // Text past 1 Mi characters is refused before it is copied anywhere (a string referenced 400 times counts 400 times).
    const mb = "x".repeat(1_048_576);
    assert.match((await registry.check("small", { a: mb, b: "y" })) ?? "", /more than 1,048,576 characters of text and names: too large to check/);
    assert.match((await registry.check("small", { list: many(400, () => mb.slice(0, 4_000)) })) ?? "", /too large to check/);
    // A plain schema (what tools mostly declare) is checked as well on few values and on many.
    tool("plain", { type: "object", properties: { xs: { type: "array", items: { type: "number" } }, unit: { enum: ["a", "b"] } }, required: ["xs"], additionalProperties: false });
    assert.equal(await registry.check("plain", { xs: [1, 2], unit: "a" }), null);
    assert.equal(await registry.check("plain", { xs: many(2_000, (i) => i) }), null); // past the in-thread 256: in the check thread (50,000 passed 250 ms once on a loaded CI run under Deno)
    assert.match((await registry.check("plain", { xs: [1, "2"], unit: "c" })) ?? "", /#\/xs\/1: Instance type "string" is invalid.*#\/unit/);
    // A long property name goes to the check thread (every issue's location holds it): answered there.
    assert.match((await registry.check("plain", { xs: [1], ["k".repeat(300_000)]: 1 })) ?? "", /^#: Property "k+/);
  });

  it("a host-wide http: grant and a pinned port on the other side meet in that port, either way round", () => {
    const reaches = (requested: string[], granted: string[], url: string) => grantedOf(requested, granted).allowsHttp(new URL(url));
    assert.ok(reaches(["http:127.0.0.1"], ["http:127.0.0.1:8080"], "http://127.0.0.1:8080/x"));
    assert.ok(!reaches(["http:127.0.0.1"], ["http:127.0.0.1:8080"], "http://127.0.0.1:8081/x"), "only the pinned port");
    assert.ok(reaches(["http:127.0.0.1:8080"], ["http:127.0.0.1"], "http://127.0.0.1:8080/x"));
    assert.ok(!reaches(["http:127.0.0.1:8080"], ["http:127.0.0.1"], "http://127.0.0.1:9/x"), "only the requested port");
    assert.ok(reaches(["http:api.example.com"], ["http:api.example.com"], "https://api.example.com/v1"), "any port");
    assert.ok(!reaches(["http:api.example.com:8443"], ["http:api.example.com:443"], "https://api.example.com:8443/"), "two pinned ports do not meet");
    assert.deepEqual(grantedOf(["kv", "http:a.example", "sessions:read"], ["sessions:read", "http:a.example:81", "http:a.example:82"]).list, ["http:a.example:81", "http:a.example:82", "sessions:read"]);
    assert.ok(!CAPABILITY_PATTERN.test("http:example.com:99999") && !CAPABILITY_PATTERN.test("http:example.com:0") && CAPABILITY_PATTERN.test("http:example.com:65535"));
    // A default port is the port: URL drops it (https://h/ has host "h"), a pinned grant still meets it.
    assert.ok(reaches(["http:api.example.com"], ["http:api.example.com:443"], "https://api.example.com/v1"));
    assert.ok(reaches(["http:api.example.com:80"], ["http:api.example.com"], "http://api.example.com/"));
    assert.ok(!reaches(["http:api.example.com"], ["http:api.example.com:443"], "http://api.example.com/"), "port 80");
  });

  it("hookbox_http refuses headers that are the host's (hop-by-hop, framing, Host) as a trap, before any traffic", async () => {
    const h = bindHostApi({ plugin: "p", grants: grantedOf(["http:127.0.0.1"], ["http:127.0.0.1"]), kv: new PluginKv("p", undefined as never, { keys: 1, bytes: 1 }), readMessages: () => [], log: () => undefined });
    h.begin(Date.now() + 5_000);
    const ctxWith = (text: string) => ({ read: () => ({ text: () => text, bytes: () => new TextEncoder().encode(text) }), length: () => BigInt(text.length) }) as unknown as CallContext;
    for (const name of ["Connection", "keep-alive", "Transfer-Encoding", "Upgrade", "TE", "Trailer", "Expect", "Host", "Proxy-Authorization"]) {
      const req = JSON.stringify({ url: "http://127.0.0.1:1/", headers: { [name]: "hookbox-plugin" } });
      const e = await Promise.resolve()
        .then(() => h.functions.hookbox_http!(ctxWith(req), 1n))
        .then(() => undefined, (err: unknown) => err as PluginCallError);
      assert.equal(e?.kind, "trap", name);
      assert.match(e!.message, new RegExp(`bad request: header "${name.toLowerCase()}" is the host's to set`), name);
    }
  });

  it("a denied host call says whether the manifest did not request it or the operator did not grant it", () => {
    const text = (requested: string[], capability: string | string[]) => {
      try {
        deny("p", "hookbox_x", capability, requested);
      } catch (err) {
        return (err as Error).message;
      }
      throw new Error("deny returned");
    };
    assert.match(text([], "kv"), /p's manifest\.json does not request \(add it to "capabilities"/);
    assert.match(text(["kv"], "kv"), /the operator has not granted to p \(config plugins\.grants\.p\)/);
    // A request on the port the manifest asks for blames the operator; on another port, the manifest.
    assert.match(text(["http:api.example.com:8443"], ["http:api.example.com:8443", "http:api.example.com"]), /operator has not granted/);
    assert.match(text(["http:api.example.com:8443"], "http:api.example.com"), /does not request; it requests "http:api\.example\.com:8443"/);
    assert.match(text(["http:other.example"], "http:api.example.com"), /does not request/);
  });

  // An outside operator probe: a tool named as a built-in one failed first for its missing tool_
  // export (the author added it), and only then for the name.
  it("a manifest tool named as a built-in fails the load for that reason first, whatever the module exports", async () => {
    const dir = pluginDir();
    dir.write("shadow", { name: "shadow", version: "1.0.0", hooks: [], tools: [{ name: "calculator", description: "x", parameters: { type: "object" } }] }, readFileSync(join(HOSTILE_DIR, "counter", "plugin.wasm")));
    const s = await startPluginServer({ dir: dir.path, enabled: ["shadow"] });
    try {
      const info = (await s.api("GET", "/v1/plugins/shadow")).body.plugin;
      assert.deepEqual([info.status, info.reason], ["failed", 'tool "calculator" is already declared by the core (built-in)']);
    } finally {
      await s.close();
      dir.remove();
    }
  });

  // An outside operator probe: limits above the manifest's ceilings were capped without a word,
  // and the limits a plugin runs under were shown nowhere.
  it("a manifest limit above its ceiling is capped with a warning in the plugin's log; the effective limits are in its info", async () => {
    const dir = pluginDir();
    dir.write("greedy", { name: "greedy", version: "1.0.0", hooks: [], limits: { fuel: 99_999_999_999, memory_pages: 5000, timeout_seconds: 999 } }, readFileSync(join(HOSTILE_DIR, "counter", "plugin.wasm")));
    const s = await startPluginServer({ dir: dir.path, enabled: ["greedy"] });
    try {
      const info = (await s.api("GET", "/v1/plugins/greedy")).body.plugin;
      assert.equal(info.status, "active");
      assert.deepEqual(info.limits, { fuel: 1_000_000_000, memory_pages: 1024, max_output_bytes: 65_536, timeout_seconds: 30 });
      const logs = ((await s.api("GET", "/v1/plugins/greedy/logs")).body.logs as Array<{ level: string; message: string }>).map((l) => [l.level, l.message]);
      assert.deepEqual(logs, [
        ["warn", "manifest limits.fuel 99999999999 is above its ceiling: 1000000000 applies (the operator's plugins.limits may set more)"],
        ["warn", "manifest limits.memory_pages 5000 is above its ceiling: 1024 applies (the operator's plugins.limits may set more)"],
        ["warn", "manifest limits.timeout_seconds 999 is above plugins.hook_callback_timeout: 30 applies (the operator's plugins.limits may set more)"],
      ]);
    } finally {
      await s.close();
      dir.remove();
    }
  });

  describe("over HTTP", () => {
    let s: PluginServer;
    let dir: PluginDir;
    before(async () => {
      dir = pluginDir([], ["errors", "counter"]);
      dir.write("typo", { name: "typo", version: "1.0.0", hooks: ["on_session_start", "pre_llm_cal"] }, readFileSync(join(HOSTILE_DIR, "counter", "plugin.wasm")));
      // Declares commands but cannot run them: one does not load, one is not enabled.
      const declaring = (name: string, cmd: string) => ({ name, version: "1.0.0", hooks: [], commands: [{ name: cmd, description: "x" }] });
      dir.write("broken", declaring("broken", "fixme"), Buffer.from("not a wasm module"));
      dir.write("unused", declaring("unused", "later"), readFileSync(join(HOSTILE_DIR, "counter", "plugin.wasm")));
      s = await startPluginServer({ dir: dir.path, enabled: ["errors", "typo", "broken"], quarantine_after: 100 });
    });
    after(async () => {
      await s.close();
      dir.remove();
    });
    const failureOf = async (cmd: string, raw_args = "") => {
      const r = await command(s, cmd, { raw_args });
      assert.ok(r.status >= 400, `${cmd} should fail: ${JSON.stringify(r.body)}`);
      return r.body.error.message as string;
    };

    it("a command's output nested deeper than hooks allow is its reply as written, not a host stack overflow", async () => {
      // Re-encoding 30,000 levels overflowed the host's stack: 422 "Maximum call stack size exceeded"
      // for a call that counted as ok (found by an outside probe).
      const deep = "[".repeat(30_000) + "]".repeat(30_000);
      const r = await command(s, "echo", { raw_args: "deep 30000" });
      assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 200));
      assert.equal(r.body.output, deep);
      assert.equal((await command(s, "echo", { raw_args: '{"text":"shallow"}' })).body.output, "shallow", "JSON within the limit is read as before");
    });

    it("a command whose plugin failed to load is 503 naming the plugin and why; a disabled plugin's is 404 saying so", async () => {
      const broken = await command(s, "fixme", {});
      assert.deepEqual([broken.status, broken.body.error.code], [503, "plugin_unavailable"]);
      assert.match(broken.body.error.message, /^\/fixme is a command of plugin broken, which is failed \(.+\)$/);
      const unused = await command(s, "later", {});
      assert.deepEqual([unused.status, unused.body.error.code], [404, "unknown_command"]);
      assert.equal(unused.body.error.message, "/later is a command of plugin unused, which is disabled (not listed in plugins.enabled)");
      assert.equal((await command(s, "nosuch", {})).body.error.message, "unknown command /nosuch; /commands lists them");
    });

    it("a thrown Error's message reaches the failure text, with where it was thrown", async () => {
      assert.match(await failureOf("throw", "the disk is full"), /abort: the disk is full at plugins-wasm\/hostile\/errors\/plugin\.ts:\d+:\d+/);
    });

    it("a non-zero return is a failure that says so", async () => {
      assert.match(await failureOf("rc"), /command_rc returned 7 \(non-zero is a failure\)/);
    });

    it("a missing beginCall() is named at once, every time (not a memory failure later)", async () => {
      for (let i = 0; i < 3; i++) assert.match(await failureOf("nobegin"), /command_nobegin returned without calling beginCall\(\)/);
      assert.equal((await command(s, "ok", {})).body.output, "fine");
    });

    it("the log ring has each failure, in order, and pages with since/limit; unknown names get a suggestion", async () => {
      const { status, body } = await s.api("GET", "/v1/plugins/errors/logs");
      assert.equal(status, 200);
      const failures = body.logs.filter((l: { source: string }) => l.source === "failure").map((l: { message: string }) => l.message);
      assert.match(failures[0], /^command_throw failed \(trap\): abort: the disk is full/);
      assert.match(failures[1], /^command_rc failed \(trap\)/);
      assert.equal(failures.filter((m: string) => m.startsWith("command_nobegin failed")).length, 3);
      const last = body.logs.at(-1).seq;
      assert.deepEqual((await s.api("GET", `/v1/plugins/errors/logs?since=${last}`)).body.logs, []);
      assert.equal((await s.api("GET", "/v1/plugins/errors/logs?limit=1")).body.logs[0].seq, last);
      const unknown = await s.api("GET", "/v1/plugins/eror/logs");
      assert.equal(unknown.status, 404);
      assert.match(unknown.body.error.message, /did you mean errors\?/);
      assert.equal((await s.api("GET", "/v1/plugins/errors/logs?limit=0")).status, 400);
    });

    it("hookbox plugins logs NAME reads the running server's ring", async () => {
      const out: string[] = [];
      const err: string[] = [];
      const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l) };
      assert.equal(await runCli(["plugins", "logs", "errors", "--url", s.url, "--limit", "2"], io), 0, err.join("\n"));
      assert.equal(out.length, 2);
      assert.match(out[1]!, /^\d+ \S+ error +failure +command_\w+ failed \(trap\)/);
      assert.equal(await runCli(["plugins", "logs", "eror", "--url", s.url], io), 1);
      assert.match(err.join("\n"), /did you mean errors\?/);
      assert.doesNotMatch(err.join("\n"), /shows the stack/, "a plugin not found is an answer, not a crash");
      // The CLI takes what the server takes (an outside probe: --since 1000000000 passed here, the
      // server answered 400, and the CLI exited 1, not 2 as bad input does).
      err.length = 0;
      assert.equal(await runCli(["plugins", "logs", "errors", "--url", s.url, "--since", "1000000000"], io), 2);
      assert.match(err.join("\n"), /--since.*from 0 to 999999999/);
    });

    // An outside operator probe: a 401 said only "missing bearer token", not which setting sends one.
    it("hookbox plugins logs against a server with a token names HOOKBOX_API_TOKEN", async () => {
      const guarded = await startPluginServer({ dir: dir.path, enabled: ["errors"] }, { config: { api_token: "right-token" } });
      try {
        for (const [token, hint] of [
          [undefined, /the server requires a token: set HOOKBOX_API_TOKEN \(or api_token in the config\)/],
          ["wrong-token", /the token this CLI sends \(api_token \/ HOOKBOX_API_TOKEN\) is not the server's/],
        ] as const) {
          const err: string[] = [];
          const io = { out: () => {}, err: (l: string) => err.push(l) };
          const config = parseConfig(token ? { api_token: token } : {}, {});
          assert.equal(await runCli(["plugins", "logs", "errors", "--url", guarded.url], io, { config }), 1);
          assert.match(err.join("\n"), hint);
        }
        const out: string[] = [];
        const ok = await runCli(["plugins", "logs", "errors", "--url", guarded.url], { out: (l) => out.push(l), err: (l) => out.push(l) }, { config: parseConfig({ api_token: "right-token" }, {}) });
        assert.equal(ok, 0, out.join("\n"));
      } finally {
        await guarded.close();
      }
    });

    // Without --url the list is the CLI process's own: its stats were all zero (an outside operator
    // probe took them for the server's).
    it("hookbox plugins list --url shows the running server's stats", async () => {
      const out: string[] = [];
      const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
      const calls = (await s.api("GET", "/v1/plugins/errors")).body.plugin.stats.calls as number;
      assert.ok(calls > 0);
      assert.equal(await runCli(["plugins", "list", "--url", s.url], io), 0, out.join("\n"));
      assert.match(out.find((l) => l.startsWith("errors "))!, new RegExp(`calls=${calls} `));
    });

    it("a manifest hook typo is logged with a suggestion in that plugin's ring", async () => {
      const logs = (await s.api("GET", "/v1/plugins/typo/logs")).body.logs.map((l: { message: string }) => l.message);
      assert.ok(logs.some((m: string) => /unknown hook "pre_llm_cal" \(did you mean pre_llm_call\?\)/.test(m)), JSON.stringify(logs));
    });
  });
});
