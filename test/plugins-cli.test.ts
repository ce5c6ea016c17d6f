// `hookbox plugins list|enable|disable` against a core running the real plugin runtime.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { runCli } from "../runtime/cli.ts";
import { startPluginServer, SEED_DIR, type PluginServer } from "./helpers/plugins.ts";

describe("hookbox plugins", () => {
  let s: PluginServer;
  before(async () => {
    s = await startPluginServer({ dir: SEED_DIR, enabled: ["whoami", "sidecar-index"], disabled: ["memory-reinject"], grants: { "sidecar-index": ["kv"] } });
  });
  after(() => s.close());

  async function cli(...argv: string[]) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(["plugins", ...argv], { out: (l) => out.push(l), err: (l) => err.push(l) }, { core: s.core });
    return { code, out: out.join("\n"), err: err.join("\n") };
  }

  it("lists status, grants and reasons", async () => {
    const r = await cli("list");
    assert.equal(r.code, 0);
    assert.match(r.out, /sidecar-index\s+active\s+v1\.0\.0\s+granted=\[kv\]/);
    assert.match(r.out, /task-tracker\s+disabled .*reason: not listed in plugins\.enabled/);
    const json = JSON.parse((await cli("list", "--json")).out);
    assert.equal(json.plugins.find((p: any) => p.name === "whoami").status, "active");
  });

  it("disables and enables, persisted, and refuses unknown names and bad usage", async () => {
    const off = await cli("disable", "whoami");
    assert.equal(off.code, 0);
    assert.match(off.out, /whoami\s+disabled .*reason: disabled by operator/);
    assert.equal((await s.api("POST", "/v1/commands/whoami", {})).status >= 400, true, "its command is gone");
    const on = await cli("enable", "task-tracker");
    assert.match(on.out, /task-tracker\s+active/);
    const rows = await s.core.storage.db.selectFrom("plugin_state").select(["name", "enabled"]).orderBy("name").execute();
    assert.deepEqual(rows, [
      { name: "task-tracker", enabled: 1 },
      { name: "whoami", enabled: 0 },
    ]);
    assert.equal((await cli("enable", "nope")).code, 1);
    // plugins.disabled wins: an enable says so and changes nothing.
    const denied = await cli("enable", "memory-reinject");
    assert.equal(denied.code, 1);
    assert.match(denied.err, /disabled by the config \(plugins\.disabled\)/);
    const http = await s.api("POST", "/v1/plugins/memory-reinject/enable", {});
    assert.deepEqual([http.status, http.body.error.code], [409, "disabled_by_config"]);
    assert.equal((await s.api("GET", "/v1/plugins/memory-reinject")).body.plugin.status, "disabled");
    const stored = await s.core.storage.db.selectFrom("plugin_state").select("name").where("name", "=", "memory-reinject").execute();
    assert.deepEqual(stored, []);
    assert.equal((await cli("frob")).code, 2);
    assert.equal((await cli("enable")).code, 2);
  });
});
