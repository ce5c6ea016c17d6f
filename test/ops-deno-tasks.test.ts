// The deno tasks call plain `deno`, which deno task resolves to the deno running it: they work with
// the npm-installed deno and with a global one alike, whatever is (or is not) on PATH. Run here with
// the npm one and a PATH that has no deno at all.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DENO = fileURLToPath(new URL("../node_modules/deno/deno", import.meta.url));
const NO_DENO_PATH = "/usr/bin:/bin";

function task(...args: string[]) {
  const r = spawnSync(DENO, ["task", ...args], {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...process.env, PATH: NO_DENO_PATH, DENO_NO_UPDATE_CHECK: "1", HOOKBOX_LOG: "error", NO_COLOR: "1" },
    timeout: 300_000,
  });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

describe("deno tasks", () => {
  it("name no path to a deno binary", () => {
    const tasks: Record<string, string> = JSON.parse(readFileSync(new URL("../deno.json", import.meta.url), "utf8")).tasks;
    for (const [name, command] of Object.entries(tasks)) assert.match(command, /^deno (run|test) /, name);
    assert.equal(existsSync(fileURLToPath(new URL("../node_modules/.bin/deno", import.meta.url))), false, "npm's .bin/deno would shadow the task runner's deno");
  });

  it("run the CLI and build a plugin with no deno on PATH", () => {
    const help = task("hookbox", "sessions", "--help");
    assert.equal(help.code, 0, help.out);
    assert.match(help.out, /Usage: hookbox sessions/);
    const build = task("build:plugins", "whoami");
    assert.equal(build.code, 0, build.out);
    assert.match(build.out, /build-plugins: 1\/1 built/);
  });
});
