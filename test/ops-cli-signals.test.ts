// Ctrl-C (SIGINT) or SIGTERM during a CLI command: what was started is finished, then it exits 130.
// A delete's on_session_delete and its plugins' clean-up run after its commit: a CLI stopped between
// the two left the plugins' data of the deleted sessions behind (found by an outside operator probe:
// 14,000 sidecar-index entries, cleaned only by a server's sweep 10 minutes later, if one ran).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnHookbox } from "./helpers/child.ts";
import { pluginDir, type PluginDir } from "./helpers/plugin-dir.ts";
import { openNative } from "../runtime/storage/native.ts";
import { newSession, startPluginServer } from "./helpers/plugins.ts";

describe("a CLI command stopped by a signal", () => {
  let dir: string;
  let plugins: PluginDir;
  let config: object;
  const ids: string[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "hookbox-cli-signal-"));
    // loop's on_session_delete spins until its 2 s time limit, before sidecar-index's clean-up (name order).
    plugins = pluginDir(["sidecar-index"], ["loop"]);
    const pluginConfig = {
      dir: plugins.path,
      enabled: ["loop", "sidecar-index"],
      grants: { "sidecar-index": ["kv"] },
      limits: { loop: { fuel: 1_000_000_000_000, timeout_seconds: 2 } },
    };
    config = { db_url: `file:${join(dir, "hookbox.db")}`, sessions_dir: join(dir, "sessions"), plugins: pluginConfig };
    const s = await startPluginServer(pluginConfig, { config: { db_url: `file:${join(dir, "hookbox.db")}`, sessions_dir: join(dir, "sessions") } });
    try {
      for (let i = 0; i < 20; i++) ids.push(await newSession(s));
      await s.plugins.flush();
    } finally {
      await s.close();
    }
  });
  after(() => {
    plugins.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it("sessions delete finishes its plugins' clean-up after a SIGINT that came after its commit, then exits 130", async () => {
    const db = openNative(join(dir, "hookbox.db"));
    const count = (sql: string) => Number((db.prepare(sql).raw(true).all([]) as unknown[][])[0]![0]);
    try {
      assert.equal(count("select count(*) from plugin_kv where plugin = 'sidecar-index'"), ids.length, "each session indexed");
      const cli = spawnHookbox(mkdtempSync(join(dir, "cli-")), config, ["sessions", "delete", ...ids]);
      // The delete is committed: its fan-out (loop's 2 s first) is under way.
      for (let i = 0; i < 600 && count("select count(*) from sessions") > 0; i++) await new Promise((r) => setTimeout(r, 25));
      assert.equal(count("select count(*) from sessions"), 0, cli.output());
      cli.proc.kill("SIGINT");
      const exited = await cli.exited;
      assert.match(cli.output(), /SIGINT: finishing what was started, then stopping/);
      assert.equal(count("select count(*) from plugin_kv where plugin = 'sidecar-index'"), 0, "sidecar-index cleaned up");
      // A shell sees 130 either way; Deno's process here ends as killed by the signal once its work
      // is done (checked above), Node's exits with 130.
      assert.ok(exited === 130 || ("Deno" in globalThis && exited === "SIGINT"), `${exited}: ${cli.output()}`);
    } finally {
      db.close();
    }
  });
});
