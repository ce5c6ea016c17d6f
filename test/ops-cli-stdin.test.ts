// `sessions delete -` and `sessions archive -` read the ids from standard input: a bulk delete of
// 20,000 ids through `npm run hookbox -- sessions delete $(cat ids)` passed what a command line
// holds and exited 249 with nothing said (found by an outside operator probe).
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startTestServer } from "./helpers/server.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

describe("CLI: session ids from standard input", () => {
  const dir = mkdtempSync(join(tmpdir(), "hookbox-cli-stdin-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("deletes the ids given on standard input, by lines and spaces; none is a usage error", async () => {
    const db_url = `file:${join(dir, "hookbox.db")}`;
    const t = await startTestServer({ config: { db_url, sessions_dir: join(dir, "sessions") } });
    const ids: string[] = [];
    try {
      for (let i = 0; i < 3; i++) ids.push((await t.api("POST", "/v1/sessions", {})).body.session.id);
    } finally {
      await t.close();
    }
    const configPath = join(dir, "hookbox.config.json");
    writeFileSync(configPath, JSON.stringify({ db_url, sessions_dir: join(dir, "sessions") }));
    const run = (input: string) => {
      const argv = "Deno" in globalThis ? ["run", "-A", "runtime/cli.ts", "sessions", "delete", "-"] : ["--import", "tsx", "runtime/cli.ts", "sessions", "delete", "-"];
      try {
        return { code: 0, out: execFileSync(process.execPath, argv, { cwd: ROOT, input, encoding: "utf8", env: { ...process.env, HOOKBOX_CONFIG: configPath, HOOKBOX_LOG: "error" } }) };
      } catch (err) {
        const e = err as { status: number; stdout: string; stderr: string };
        return { code: e.status, out: `${e.stdout}${e.stderr}` };
      }
    };
    const done = run(`${ids[0]}\n${ids[1]} ${ids[2]}\n`);
    assert.equal(done.code, 0, done.out);
    assert.deepEqual(done.out.trim().split("\n").sort(), ids.map((id) => `deleted ${id}`).sort());
    // More ids than SQLite takes as variables (32,766): checked as one JSON list; the refusal names 20.
    const many = run(Array.from({ length: 40_000 }, (_, i) => `s_missing_${i}`).join("\n"));
    assert.equal(many.code, 1, many.out.slice(0, 300));
    assert.match(many.out, /sessions not found: s_missing_0, s_missing_1, .* and 39980 more\n/);
    const none = run("\n");
    assert.equal(none.code, 2, none.out);
    assert.match(none.out, /no session ids on standard input/);
  });
});

// Found by an outside parity probe: on Node, a database path under /proc spun at full CPU, deaf to
// SIGTERM (Node's recursive mkdir loops where the kernel answers ENOENT); Deno failed at once.
describe("CLI: a database folder that cannot be made", () => {
  const dir = mkdtempSync(join(tmpdir(), "hookbox-cli-proc-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "hookbox.config.json"), "{}");
  const sessionsList = (dbUrl: string) => {
    const argv = "Deno" in globalThis ? ["run", "-A", "runtime/cli.ts", "sessions", "list"] : ["--import", "tsx", "runtime/cli.ts", "sessions", "list"];
    const res = spawnSync(process.execPath, argv, {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 60_000,
      killSignal: "SIGKILL",
      env: { ...process.env, HOOKBOX_CONFIG: join(dir, "hookbox.config.json"), HOOKBOX_DB_URL: dbUrl, HOOKBOX_LOG: "error" },
    });
    assert.equal(res.signal, null, "it ended by itself");
    assert.equal(res.status, 1, res.stderr);
    return res.stderr;
  };

  it("fails at once, naming the error", () => {
    assert.match(sessionsList("file:/proc/hookbox-nope/x.db"), /ENOENT.*\/proc\/hookbox-nope/);
  });

  // A file in the folder's place was taken for the folder; the driver then said only "ConnectionFailed(... 14)".
  it("a file where the folder should be is named", () => {
    writeFileSync(join(dir, "data"), "");
    assert.match(sessionsList(`file:${join(dir, "data", "hookbox.db")}`), new RegExp(`hookbox: ${join(dir, "data")} is a file, not a folder`));
    // Deeper: the file is a parent of the folder (the lookup says ENOTDIR there).
    assert.match(sessionsList(`file:${join(dir, "data", "sub", "hookbox.db")}`), new RegExp(`hookbox: ${join(dir, "data")} is a file, not a folder`));
  });
});

// Found by an outside probe: on Node the CLI exited before a pipe had taken its stdout, so a long
// answer (--json) was cut at 64 KiB; redirected to a file it was whole.
describe("CLI: a long answer through a pipe", () => {
  const dir = mkdtempSync(join(tmpdir(), "hookbox-cli-pipe-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("comes out whole", () => {
    writeFileSync(join(dir, "hookbox.config.json"), JSON.stringify({ db_url: `file:${join(dir, "hookbox.db")}`, plugins: { dir: join(ROOT, "plugins-wasm/hostile") } }));
    // kvflood's fill writes 300 keys of 400 characters: the report lists them (about 140 KB).
    const runtime = "Deno" in globalThis ? `'${process.execPath}' run -A` : `'${process.execPath}' --import tsx`;
    const res = spawnSync("bash", ["-c", `${runtime} runtime/cli.ts plugins call kvflood command kvflood fill 0 300 400 --json | cat`], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 60_000,
      maxBuffer: 16 * 1024 * 1024,
      env: { ...process.env, HOOKBOX_CONFIG: join(dir, "hookbox.config.json"), HOOKBOX_LOG: "error" },
    });
    assert.equal(res.status, 0, res.stderr);
    assert.ok(res.stdout.length > 100_000, `${res.stdout.length} characters`);
    assert.equal(JSON.parse(res.stdout).kv_writes.length, 300);
  });
});
