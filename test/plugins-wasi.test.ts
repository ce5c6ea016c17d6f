// Plugins from standard WASI toolchains under hookbox's capability-free WASI, through real HTTP:
// the C example (wasi-libc: printf into the plugin's log, clock, random) and the Rust example
// (no_std, Extism kernel + KV) answer their commands and hooks; the C probe's every attempt at files,
// directories, stdin, environment and arguments gets an errno, and exit() ends only that call.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { command, newSession, startPluginServer, turn, SEED_DIR, HOSTILE_DIR, type PluginServer } from "./helpers/plugins.ts";
import { pluginDir, type PluginDir } from "./helpers/plugin-dir.ts";
import { skipUnlessBuilt } from "./helpers/toolchains.ts";

const missing = ["hello-c", "hello-rust"].map((n) => skipUnlessBuilt(join(SEED_DIR, n, "plugin.wasm"))).find((x) => x) ??
  skipUnlessBuilt(join(HOSTILE_DIR, "wasiprobe", "plugin.wasm"));

describe("plugins in C and Rust (WASI)", { skip: missing }, () => {
  let s: PluginServer;
  let dir: PluginDir;
  before(async () => {
    dir = pluginDir(["hello-c", "hello-rust"], ["wasiprobe"]);
    s = await startPluginServer({ dir: dir.path, enabled: ["hello-c", "hello-rust", "wasiprobe"], grants: { "hello-rust": ["kv"] } });
  });
  after(async () => {
    await s.close();
    dir.remove();
  });

  const logs = async (name: string) => (await s.api("GET", `/v1/plugins/${name}/logs`)).body.logs as Array<{ seq: number; level: string; source: string; message: string }>;

  it("all three load", async () => {
    const { body } = await s.api("GET", "/v1/plugins");
    for (const name of ["hello-c", "hello-rust", "wasiprobe"]) {
      const p = body.plugins.find((x: { name: string }) => x.name === name);
      assert.equal(p.status, "active", `${name}: ${p.reason}`);
    }
  });

  it("C: printf reaches the plugin's log as stdout, stderr as stderr; clock and random work", async () => {
    const r = await command(s, "hello_c", { raw_args: "Bob" });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const m = /^hello from C, Bob \(lucky number (\d+), year (\d+)\)$/.exec(r.body.output);
    assert.ok(m, r.body.output);
    assert.ok(Number(m[2]) >= 2024, "the realtime clock is real");
    const lines = await logs("hello-c");
    assert.ok(lines.some((l) => l.source === "stdout" && l.level === "info" && l.message === "greeting Bob"), JSON.stringify(lines));
    assert.ok(lines.some((l) => l.source === "stderr" && l.level === "warn" && /^clock says \d+$/.test(l.message)), JSON.stringify(lines));
  });

  it("C: a hook from a real turn runs (post_llm_call prints the session)", async () => {
    const sid = await newSession(s);
    await turn(s, sid, "hello there");
    assert.ok((await logs("hello-c")).some((l) => l.message === `model answered in session ${sid}`));
  });

  it("Rust: command with KV, hook with hookbox_log, failure text from error_set", async () => {
    assert.equal((await command(s, "hello_rust", { raw_args: "Ada" })).body.output, "hello from Rust, Ada (greeting #1)");
    assert.equal((await command(s, "hello_rust", {})).body.output, "hello from Rust (greeting #2)");
    const failed = await command(s, "hello_rust", { raw_args: "fail" });
    assert.ok(failed.status >= 400);
    assert.match(JSON.stringify(failed.body), /asked to fail/);
    const sid = await newSession(s);
    assert.ok((await logs("hello-rust")).some((l) => l.source === "log" && l.message === `session started: ${sid}`));
    // Long arguments: the input is read whole, the answer shows 200 bytes of them and stays JSON.
    assert.match((await command(s, "hello_rust", { raw_args: "y".repeat(9_000) })).body.output, /^hello from Rust, y{200} \(greeting #3\)$/);
    assert.match((await command(s, "hello_c", { raw_args: "z".repeat(9_000) })).body.output, /^hello from C, z{254} \(lucky number \d+, year \d+\)$/);
  });

  it("WASI gives no host access: files, directories, stdin, environment are errnos; exit ends only the call", async () => {
    const r = await command(s, "probe", {});
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const p = JSON.parse(r.body.output);
    const ENOTCAPABLE = 76;
    const EBADF = 8;
    assert.equal(p.read_etc_passwd, ENOTCAPABLE);
    assert.equal(p.write_tmp, ENOTCAPABLE);
    assert.equal(p.read_relative, ENOTCAPABLE);
    assert.equal(p.opendir, ENOTCAPABLE);
    assert.deepEqual([p.stdin_read, p.stdin_errno], [-1, EBADF]);
    assert.deepEqual([p.env_count, p.home], [0, null]);
    assert.deepEqual([p.random_ok, p.monotonic_ok], [1, 1]);
    const quit = await command(s, "quit", {});
    assert.ok(quit.status >= 400);
    assert.match(JSON.stringify(quit.body), /proc_exit\(3\)/);
    assert.equal((await command(s, "probe", {})).status, 200, "the next call runs on a fresh instance");
  });
});

describe("a WASI plugin granted http:", { skip: missing }, () => {
  // Without JS Promise Integration (Node 20) an http: grant runs a plugin in a worker thread; with it
  // (Deno) the plugin stays in-thread.
  const jspi = typeof (WebAssembly as { Suspending?: unknown }).Suspending === "function";
  let s: PluginServer;
  let dir: PluginDir;
  before(async () => {
    dir = pluginDir();
    const manifest = JSON.parse(readFileSync(join(SEED_DIR, "hello-c", "manifest.json"), "utf8"));
    dir.write("hello-c", { ...manifest, capabilities: ["http:127.0.0.1", "sessions:read"] }, readFileSync(join(SEED_DIR, "hello-c", "plugin.wasm")));
    s = await startPluginServer({ dir: dir.path, enabled: ["hello-c"], grants: { "hello-c": ["http:127.0.0.1", "sessions:read"] } });
  });
  after(async () => {
    await s.close();
    dir.remove();
  });

  // A worker thread serves the module's WASI calls over its memory there.
  it(`loads and answers (${jspi ? "in-thread, suspending" : "in a worker"})`, async () => {
    const r = await command(s, "hello_c", { raw_args: "Bob" });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.match(r.body.output, /Bob/);
  });
});
