// Doc test: the README's curl walk-through, run as written by bash and curl against a real server
// started with the repository's own hookbox.config.json (the example plugins), twice in a row (it
// must be re-runnable). Every curl fails the run on an HTTP error (--fail-with-body), so a step
// that stops being true fails this test.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { command, newSession, startPluginServer, type PluginServer } from "./helpers/plugins.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const README = readFileSync(new URL("../README.md", import.meta.url), "utf8");

/** The first ```sh block after "## HTTP API", with its `H=` line (the test sets H). */
function walkthrough(): string {
  const section = README.slice(README.indexOf("## HTTP API"));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, "README has an HTTP walk-through");
  const lines = block.split("\n");
  assert.equal(lines[0], "H=http://127.0.0.1:8787", "the walk-through starts by naming the server");
  return lines.slice(1).join("\n");
}

function bash(script: string, env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = spawn("bash", ["-c", script], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (out += b.toString()));
    child.once("close", (code) => resolve({ code: code ?? -1, out }));
  });
}

describe("README walk-through", () => {
  let s: PluginServer;
  before(async () => {
    const { plugins } = JSON.parse(readFileSync(new URL("../hookbox.config.json", import.meta.url), "utf8"));
    s = await startPluginServer({ ...plugins, dir: fileURLToPath(new URL("../plugins-wasm", import.meta.url)) });
  });
  after(() => s.close());

  it("runs as written, twice, every step answering 2xx", async () => {
    // Each curl prints its answer on its own line and fails the script on an HTTP error.
    const prelude = 'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; echo; }\n';
    for (const round of [1, 2]) {
      const { code, out } = await bash(prelude + walkthrough(), { H: s.url });
      assert.equal(code, 0, `round ${round}:\n${out}`);
      const answers = out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
      const reply = answers.find((a) => a.type === "reply");
      assert.match(reply.reply, /20/, "the calculator turn");
      assert.ok(answers.some((a) => a.type === "command" && a.command === "commands"), "the /commands turn");
      assert.ok(answers.some((a) => a.command === "whoami" && /ana/.test(a.output)), "whoami outside a turn");
      const compress = answers.find((a) => "compacted" in a);
      assert.equal(typeof (compress.compacted ? compress.after_tokens : compress.detail), compress.compacted ? "number" : "string");
      assert.ok(answers.some((a) => Array.isArray(a.deleted_ids) && a.deleted_ids.length === 1), "the delete removed the session");
      assert.ok(answers.some((a) => a.ready === true), "readyz");
    }
  });

  // /conventions sets a system-prompt section of every session: any chat user could rewrite it for
  // all (an outside probe); the repository's config lets only its operator user do so.
  it("refuses /conventions to users the repository's config does not list; runs it for `operator`", async () => {
    const asUser = async (user: string) => {
      const sid = await newSession(s, user);
      return (await command(s, "conventions", { session_id: sid, raw_args: "Always answer in French." })).status;
    };
    assert.equal(await asUser("mallory"), 403);
    assert.equal(await asUser("operator"), 200);
  });
});
