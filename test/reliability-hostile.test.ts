// Hostile plugins (real built WASM, real runtime) beside the well-behaved `counter` plugin and a
// stream of concurrent HTTP traffic: every request succeeds, counter sees every event, the hostile
// plugin is stopped with its typed failure, counted, and quarantined (visible in GET /v1/plugins,
// persisted), and not called again. Broken plugins on disk fail at load with a clear reason while
// the server starts with the others.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startPluginServer, HOSTILE_DIR, type PluginServer } from "./helpers/plugins.ts";
import { recordHooks, type HookRecorder } from "./helpers/hooks.ts";
import { inconsistencies } from "./helpers/db-check.ts";
import { lostEvents } from "./helpers/event-count.ts";
import { pluginDir, type PluginDir } from "./helpers/plugin-dir.ts";
import { HOSTILE_CASES, globalExporting, traffic, wasmImporting, type HostileCase } from "./helpers/hostile.ts";

const QUARANTINE_AFTER = 3;
const totals = { cases: 0, requests: 0, failuresStopped: 0, eventsLost: 0 };

after(() => {
  console.log(
    `# reliability hostile: ${totals.cases} hostile cases, ${totals.failuresStopped} hostile calls stopped, ${totals.requests} requests beside them, ${totals.eventsLost} events lost`,
  );
});

describe("reliability: hostile plugins beside counter and live traffic", () => {
  let probe: Server;
  let probeHits = 0;
  let probeUrl: string;
  before(async () => {
    // Where httpsnoop is told to go: any request reaching it would be a hole in the http grant.
    probe = createServer((_, res) => {
      probeHits++;
      res.end("{}");
    });
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    probeUrl = `http://127.0.0.1:${(probe.address() as AddressInfo).port}/`;
  });
  after(async () => {
    await new Promise((r) => probe.close(r));
  });

  for (const c of HOSTILE_CASES) {
    describe(c.name, () => {
      let s: PluginServer;
      let rec: HookRecorder;
      let dir: PluginDir;
      // kvsnoop gets neighbours whose KV it would love to read.
      const neighbours = c.name === "kvsnoop" ? ["memory-reinject", "sidecar-index"] : [];
      before(async () => {
        dir = pluginDir(neighbours, [c.name, "counter"]);
        const grants: Record<string, string[]> = { counter: ["kv"], [c.name]: c.grants };
        for (const n of neighbours) grants[n] = ["kv"];
        s = await startPluginServer(
          {
            dir: dir.path,
            enabled: [c.name, "counter", ...neighbours],
            grants,
            limits: c.limits ? { [c.name]: c.limits } : {},
            quarantine_after: QUARANTINE_AFTER,
            hook_callback_timeout: 5,
          },
          { config: { compaction: { keep_recent_messages: 2, cooldown_seconds: 0 } }, before: (core) => void (rec = recordHooks(core.dispatcher)) },
        );
      });
      after(async () => {
        await s.close();
        dir.remove();
      });

      it(`${c.name}: traffic all succeeds, counter sees every event, ${c.kind ? `stopped by ${c.kind} and quarantined` : "sees nothing foreign"}`, async () => {
        totals.cases++;
        const info0 = (await s.api("GET", `/v1/plugins/${c.name}`)).body.plugin;
        assert.equal(info0.status, "active", info0.reason);
        if (c.name === "httpsnoop") {
          const res = await s.api("POST", "/v1/commands/httpsnoop", { raw_args: probeUrl });
          assert.equal(res.status, 422, JSON.stringify(res.body));
          assert.match(res.body.error.message, /denied/);
        }
        const run = await traffic(s, 4, 3);
        totals.requests += run.requests;
        assert.deepEqual(run.failed, [], `${run.failed.length} of ${run.requests} requests failed beside ${c.name}`);
        assert.equal(run.turns.length, 4 * 3 * 3);

        const { lost } = await lostEvents(s, rec);
        totals.eventsLost += Object.values(lost).reduce((a, b) => a + Math.abs(b), 0);
        assert.deepEqual(lost, {}, "counter missed events");
        const counter = (await s.api("GET", "/v1/plugins/counter")).body.plugin;
        assert.equal(counter.status, "active");
        assert.equal(counter.stats.calls, counter.stats.ok, `counter failed: ${counter.stats.last_error}`);

        const { body } = await s.api("GET", "/v1/plugins");
        const info = body.plugins.find((p: { name: string }) => p.name === c.name);
        if (c.kind === null) {
          // kvsnoop: it runs, and every report it made says it saw nothing foreign.
          assert.equal(info.status, "active");
          assert.equal(info.stats.calls, info.stats.ok, info.stats.last_error);
          const reports = run.turns.flatMap((t) => t.injected.filter((i) => i.plugin === c.name).map((i) => i.context));
          assert.equal(reports.length, run.turns.length);
          for (const r of reports) assert.match(r, /^kvsnoop \{"own_ok":true,"foreign":\[\]\}$/);
          const sessions = (await s.api("GET", "/v1/sessions?limit=1000")).body.sessions.map((x: { id: string }) => x.id);
          const cmd = await s.api("POST", "/v1/commands/kvsnoop", { raw_args: sessions.join(" ") });
          assert.deepEqual(JSON.parse(cmd.body.output).foreign, []);
          return;
        }
        assert.equal(info.status, "quarantined", JSON.stringify(info.stats));
        assert.match(info.reason, new RegExp(`quarantined after ${QUARANTINE_AFTER} consecutive failures; last: ${c.kind}`));
        // Calls already queued when the quarantine hit (a worker plugin under 4 clients) still count.
        assert.ok(info.stats.failures[c.kind] >= QUARANTINE_AFTER, JSON.stringify(info.stats.failures));
        assert.equal(info.stats.ok, 0);
        assert.equal(info.stats.calls, info.stats.failures[c.kind], JSON.stringify(info.stats.failures));
        totals.failuresStopped += info.stats.failures[c.kind];
        // Once quarantined it is not called again, whatever the traffic.
        const more = await traffic(s, 2, 1);
        totals.requests += more.requests;
        assert.deepEqual(more.failed, []);
        assert.equal((await s.api("GET", `/v1/plugins/${c.name}`)).body.plugin.stats.calls, info.stats.calls, "called after quarantine");
        const row = await s.core.storage.db.selectFrom("plugin_state").selectAll().where("name", "=", c.name).executeTakeFirst();
        assert.match(row?.quarantined ?? "", /quarantined after/);
        assert.equal(probeHits, 0, "a plugin reached a host it was not granted");
        await s.plugins.flush();
        assert.deepEqual(await inconsistencies(s.core.storage.db), []);
        // The host is healthy and still serves a turn with the hostile plugin sidelined.
        assert.equal((await s.api("GET", "/v1/health")).status, 200);
      });
    });
  }
});

describe("reliability: broken plugins fail at load, the others start", () => {
  let s: PluginServer;
  let dir: PluginDir;
  const counterWasm = readFileSync(join(HOSTILE_DIR, "counter", "plugin.wasm"));
  const manifest = (name: string, extra: Record<string, unknown> = {}) => ({ name, version: "1.0.0", hooks: ["on_session_start"], ...extra });
  /** name -> [manifest, wasm, expected reason]. */
  const BROKEN: Record<string, [unknown, Uint8Array | string | undefined, RegExp]> = {
    "bad-json-manifest": ["{ not json", counterWasm, /manifest\.json/],
    "empty-manifest": [{}, counterWasm, /name/],
    "wrong-types": [{ name: "wrong-types", version: 1, hooks: "all" }, counterWasm, /version|hooks/],
    // (A well-formed hook name this host does not know loads with a warning: test/plugin-api-tools.)
    "bad-hook-name": [manifest("bad-hook-name", { hooks: ["On Everything!"] }), counterWasm, /hook names are lowercase/],
    "tool-missing-export": [manifest("tool-missing-export", { tools: [{ name: "nope", description: "d", parameters: { type: "object" } }] }), counterWasm, /exports no function "tool_nope"/],
    "tool-bad-schema": [manifest("tool-bad-schema", { tools: [{ name: "bad", description: "d", parameters: { type: "string" } }] }), counterWasm, /not a usable JSON Schema/],
    "wrong-name": [manifest("someone-else"), counterWasm, /does not match its folder/],
    "bad-capability": [manifest("bad-capability", { capabilities: ["fs:/"] }), counterWasm, /capabilit/],
    "bad-limits": [manifest("bad-limits", { limits: { fuel: -1 } }), counterWasm, /limits\.fuel/],
    "missing-wasm": [manifest("missing-wasm"), undefined, "Deno" in globalThis ? /plugin\.wasm is missing \(build it: deno task hookbox plugins build missing-wasm\)/ : /plugin\.wasm is missing \(build it: npm run hookbox -- plugins build missing-wasm\)/],
    "not-wasm": [manifest("not-wasm"), "#!/bin/sh\nrm -rf /\n", /not a valid WebAssembly module/],
    "empty-wasm": [manifest("empty-wasm"), new Uint8Array(0), /not a valid WebAssembly module/],
    "truncated-wasm": [manifest("truncated-wasm"), counterWasm.subarray(0, counterWasm.length >> 1), /not a valid WebAssembly module/],
    "unknown-import": [manifest("unknown-import"), wasmImporting("extism:host/user", "hookbox_shell", "on_session_start"), /imports unknown host function "extism:host\/user" "hookbox_shell"/],
    "env-import": [manifest("env-import"), wasmImporting("env", "system", "on_session_start"), /imports unknown host function "env" "system"/],
    // WASI preview 1 is served (capability-free, host-api/wasi.ts); anything else of that module is not.
    "wasi-import": [manifest("wasi-import"), wasmImporting("wasi_snapshot_preview1", "sock_open", "on_session_start"), /imports "wasi_snapshot_preview1" "sock_open", which is not WASI preview 1/],
    "raw-http-import": [manifest("raw-http-import"), wasmImporting("extism:host/env", "http_request", "on_session_start"), /imports unknown host function "extism:host\/env" "http_request"/],
    "missing-export": [manifest("missing-export", { commands: [{ name: "nope" }] }), counterWasm, /exports no function "command_nope"/],
    // An exported global under the hook's name is not its handler (every call would trap).
    "global-hook": [manifest("global-hook"), globalExporting("on_session_start"), /exports no function "on_session_start"/],
    // (A plugin claiming another plugin's command loads, and the command is refused for both until
    // the operator picks one: test/sandbox-commands.)
  };

  before(async () => {
    dir = pluginDir([], ["counter"]);
    for (const [name, [m, wasm]] of Object.entries(BROKEN)) dir.write(name, m, wasm);
    const names = Object.keys(BROKEN);
    s = await startPluginServer({ dir: dir.path, enabled: ["counter", ...names], grants: { counter: ["kv"] } });
  });
  after(async () => {
    await s.close();
    dir.remove();
  });

  it("lists each broken plugin as failed with a clear reason; counter is active and works", async () => {
    totals.cases += Object.keys(BROKEN).length;
    const { body } = await s.api("GET", "/v1/plugins");
    const byName = Object.fromEntries(body.plugins.map((p: { name: string }) => [p.name, p]));
    const wrong: string[] = [];
    for (const [name, [, , reason]] of Object.entries(BROKEN)) {
      const p = byName[name];
      if (p?.status !== "failed" || !reason.test(p.reason ?? "")) wrong.push(`${name}: ${p?.status} ${p?.reason}`);
    }
    assert.deepEqual(wrong, []);
    assert.equal(byName.counter.status, "active");
    const sid = (await s.api("POST", "/v1/sessions", {})).body.session.id;
    assert.equal((await s.api("POST", `/v1/sessions/${sid}/turns`, { message: "hi" })).status, 200);
    const counts = JSON.parse((await s.api("POST", "/v1/commands/counts", {})).body.output);
    assert.deepEqual([counts.on_session_start, counts.pre_llm_call, counts.post_llm_call], [1, 1, 1]);
  });

  it("enabling a broken plugin reports it failed again instead of erroring", async () => {
    for (const name of Object.keys(BROKEN)) {
      const res = await s.api("POST", `/v1/plugins/${name}/enable`);
      assert.ok(res.status === 200 || res.status === 404, `${name}: ${res.status} ${JSON.stringify(res.body)}`);
      if (res.status === 200) assert.equal(res.body.plugin.status, "failed", name);
    }
    assert.equal((await s.api("GET", "/v1/health")).status, 200);
  });
});
