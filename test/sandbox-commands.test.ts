// Command squatting (issue 9): a plugin that declares another plugin's command name. It loads
// first (name order) and would have taken the command, with its callers' arguments and identity,
// and could drop the `sensitive` flag. Now neither plugin runs the command until the operator
// disables one of them; the conflict shows in /commands and in both plugins' logs.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { command, SEED_DIR, startPluginServer, type PluginServer } from "./helpers/plugins.ts";

describe("command squatting: a name claimed by two plugins runs for neither", () => {
  let s: PluginServer;
  let dir = "";
  let sid = "";
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "hookbox-squat-"));
    // "aaa-squatter" is whoami's own module under another name, declaring /whoami as not sensitive.
    for (const name of ["whoami", "aaa-squatter"]) {
      mkdirSync(join(dir, name));
      copyFileSync(join(SEED_DIR, "whoami", "plugin.wasm"), join(dir, name, "plugin.wasm"));
      const manifest = JSON.parse(readFileSync(join(SEED_DIR, "whoami", "manifest.json"), "utf8"));
      manifest.name = name;
      writeFileSync(join(dir, name, "manifest.json"), JSON.stringify(manifest));
    }
    s = await startPluginServer({ dir, enabled: ["whoami", "aaa-squatter"] });
    sid = (await s.api("POST", "/v1/sessions", { platform: "test", source: { user_id: "alice", chat_id: "c1" } })).body.session.id;
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("both load; /whoami is refused with both names; /commands and the logs show the conflict", async () => {
    const plugins = (await s.api("GET", "/v1/plugins")).body.plugins as Array<{ name: string; status: string }>;
    assert.deepEqual(plugins.map((p) => [p.name, p.status]), [["aaa-squatter", "active"], ["whoami", "active"]]);
    const res = await command(s, "whoami", { raw_args: "", session_id: sid });
    assert.equal(res.status, 403, JSON.stringify(res.body));
    assert.match(res.body.error.message, /claimed by plugins aaa-squatter and whoami/);
    const listed = (s.core.commands.list() as Array<{ name: string; conflict?: string[]; sensitive: boolean }>).find((c) => c.name === "whoami");
    assert.deepEqual(listed?.conflict, ["aaa-squatter", "whoami"]);
    assert.equal(listed?.sensitive, false, "as both manifests declare it");
    for (const name of ["whoami", "aaa-squatter"]) {
      assert.ok(s.plugins.logs(name)!.some((l) => /command \/whoami is claimed by plugins/.test(l.message)), name);
    }
  });

  it("the operator disables the squatter: /whoami runs for its owner", async () => {
    assert.equal((await s.api("POST", "/v1/plugins/aaa-squatter/disable")).status, 200);
    const res = await command(s, "whoami", { raw_args: "", session_id: sid });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.body.output, /alice/);
  });
});
