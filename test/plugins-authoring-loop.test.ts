// The plugin author's loop, end to end: `hookbox plugins new` scaffolds a plugin in a folder outside
// this repo (AssemblyScript with the library as a package, Rust, C), builds it, a server whose
// plugins.dir is that folder loads it and answers its command over real HTTP, `hookbox plugins call`
// runs single calls, and the `serve --watch` watcher reloads rebuilt, broken and new plugins.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { runCli } from "../runtime/cli.ts";
import { parseConfig } from "../runtime/config.ts";
import { command, HOSTILE_DIR, SEED_DIR, startPluginServer, type PluginServer } from "./helpers/plugins.ts";
import { setLogLevel } from "../runtime/log.ts";
import { skipUnlessBuilt } from "./helpers/toolchains.ts";
import { watchPlugins } from "../runtime/plugins/watch.ts";
import { PluginStateStore } from "../runtime/plugins/state.ts";
import { buildPlugins } from "../runtime/plugins/scaffold.ts";
import { pluginDir } from "./helpers/plugin-dir.ts";

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l) }, { config: parseConfig({ plugins: { dir: loopDir } }) });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

let loopDir = "";

describe("hookbox plugins new -> build -> load -> call", () => {
  let dir: string;
  let s: PluginServer | undefined;
  before(() => {
    dir = loopDir = mkdtempSync(join(tmpdir(), "hookbox-loop-"));
  });
  after(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("scaffolds and builds one plugin per language; refuses a taken name and an unknown language", async () => {
    for (const [name, lang] of [["my-as", "as"], ["my-rust", "rust"], ["my-c", "c"]]) {
      const r = await cli("plugins", "new", name!, "--lang", lang!, "--dir", dir);
      assert.equal(r.code, 0, r.err);
      assert.match(r.out, new RegExp(`created .*${name}.*command /${name!.replace("-", "_")}`));
      assert.equal(JSON.parse(readFileSync(join(dir, name!, "manifest.json"), "utf8")).name, name);
    }
    assert.ok(existsSync(join(dir, "my-as", "plugin.wasm")));
    // By name, the plugin of plugins.dir is built, not a same-named one of plugins-wasm.
    const byName = await cli("plugins", "build", "my-as");
    assert.equal(byName.code, 0, byName.err);
    assert.ok(byName.out.includes(`${basename(dir)}/my-as/plugin.wasm`), byName.out);
    const again = await cli("plugins", "new", "my-as", "--dir", dir);
    assert.equal(again.code, 1);
    assert.match(again.err, /already exists/);
    const cobol = await cli("plugins", "new", "x", "--lang", "cobol", "--dir", dir);
    assert.equal(cobol.code, 2);
    assert.match(cobol.err, /--lang must be one of as, rust, c/);
    const badName = await cli("plugins", "new", "Bad Name", "--dir", dir);
    assert.deepEqual([badName.code, badName.err.split("\n")[0]], [2, 'hookbox: "Bad Name" is not a plugin name: plugin names are lowercase [a-z0-9_-], starting with a letter or digit, at most 64 chars']);
    // A plugin that is not there is not found, before any build (it said the build failed).
    const nosuch = await cli("plugins", "build", "nosuch-plugin");
    assert.deepEqual([nosuch.code, nosuch.err.trim()], [1, "hookbox: no such plugin (see above): nothing was built"]);
    assert.match(nosuch.out, /nosuch-plugin: no such file or folder \(.*\), and no plugin of plugins-wasm\/ has that name/);
    // A reserved name says so (it said "lowercase [a-z0-9_-]" for a lowercase name; an outside probe).
    const reserved = await cli("plugins", "new", "constructor", "--dir", dir);
    assert.deepEqual([reserved.code, reserved.err.split("\n")[0]], [2, 'hookbox: "constructor" is not a plugin name: "constructor" cannot name a plugin (every JavaScript object has a member of that name)']);
    // Made outside plugins.dir: the next step says how to reach it there.
    const other = mkdtempSync(join(tmpdir(), "hookbox-elsewhere-"));
    try {
      const elsewhere = await cli("plugins", "new", "far", "--dir", other, "--no-build");
      assert.equal(elsewhere.code, 0, elsewhere.err);
      assert.match(elsewhere.out, new RegExp(`HOOKBOX_PLUGINS_DIR=${other} (npm run hookbox --|deno task hookbox) plugins call far command far hi`));
      assert.match(elsewhere.out, new RegExp(`build it with: (npm run hookbox --|deno task hookbox) plugins build ${other}/far\n`), "not built: the build comes first");
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it("a server on that folder loads them and runs their commands (KV included)", async (t) => {
    const built = ["my-as", "my-rust"].filter((n) => !skipUnlessBuilt(join(dir, n, "plugin.wasm")));
    if (built.length < 2) t.diagnostic(`not built here: ${["my-as", "my-rust"].filter((n) => !built.includes(n)).join(", ")}`);
    s = await startPluginServer({ dir, enabled: built, grants: Object.fromEntries(built.map((n) => [n, ["kv"]])) });
    const greeting: Record<string, string> = { "my-as": "AssemblyScript", "my-rust": "Rust" };
    for (const name of built) {
      const cmd = name.replace("-", "_");
      const first = await command(s, cmd, { raw_args: "Ada" });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.output, `hello from ${greeting[name]}, Ada (greeting #1)`);
      assert.equal((await command(s, cmd, {})).body.output, `hello from ${greeting[name]} (greeting #2)`);
      const failed = await command(s, cmd, { raw_args: "fail" });
      assert.ok(failed.status >= 400, `${name}: a non-zero return is a failure`);
    }
  });

  it("plugins call runs one command on a temporary database: output, fuel, KV writes, logs", async (t) => {
    if (skipUnlessBuilt(join(dir, "my-c", "plugin.wasm"))) t.diagnostic("my-c not built here: C part skipped");
    const r = await cli("plugins", "call", "my-as", "command", "my_as", "Ada", "Lovelace", "--json");
    assert.equal(r.code, 0, r.err);
    const report = JSON.parse(r.out);
    assert.equal(report.ok, true);
    assert.equal(report.output, '{"text":"hello from AssemblyScript, Ada Lovelace (greeting #1)"}');
    assert.ok(report.fuel > 0);
    assert.deepEqual(report.granted, ["kv"]);
    assert.equal(report.grants_from, "manifest");
    assert.deepEqual(report.kv_writes, [{ session_id: "", key: "greetings", value: "1" }], "a fresh database each time");
    assert.equal((JSON.parse((await cli("plugins", "call", "my-as", "command", "my_as", "--json")).out)).kv_writes[0].value, "1");
    if (!skipUnlessBuilt(join(dir, "my-c", "plugin.wasm"))) {
      const c = await cli("plugins", "call", "my-c", "command", "my_c", "Bob");
      assert.equal(c.code, 0, c.err);
      assert.match(c.out, /^output: \{"text":"hello from C, Bob/m);
      assert.match(c.out, /^fuel: \d+ {2}time: [\d.]+ ms/m);
      assert.match(c.out, /info +stdout +greeting Bob/);
    }
  });

  it("plugins call runs a hook with a payload file; failures, typos and non-subscribers are explained", async () => {
    const payload = join(dir, "payload.json");
    writeFileSync(payload, JSON.stringify({ session_id: "s-42", platform: "cli", bogus: 1 }));
    const r = await cli("plugins", "call", "my-as", "on_session_start", "--payload", payload);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /my-as on_session_start: ok/);
    // Said as a reader needs it (an outside probe saw `Invalid key: Expected "profile" but received undefined`, and no word of "bogus").
    assert.match(r.out, /payload warning: profile: missing required field "profile"/, "fields the catalogue requires are pointed out");
    assert.match(r.out, /payload warning: bogus: unknown field "bogus"; allowed: hook, schema_version, session_id/, "a field the hook does not have too");
    assert.match(r.out, /info +log +session started: s-42 on cli/);
    const failed = await cli("plugins", "call", "my-as", "command", "my_as", "fail");
    assert.equal(failed.code, 1);
    assert.match(failed.out, /FAILED \(trap\): plugin error: asked to fail/);
    assert.match(failed.out, /error +failure +command_my_as failed/);
    assert.match((await cli("plugins", "call", "my-as", "on_session_strat")).err, /unknown hook "on_session_strat" \(did you mean on_session_start\?\)/);
    assert.match((await cli("plugins", "call", "my-as", "pre_llm_call")).err, /my-as does not subscribe to pre_llm_call/);
    assert.match((await cli("plugins", "call", "my-az", "on_session_start")).err, /no plugin named my-az .*did you mean my-as\?/);
    assert.match((await cli("plugins", "call", "my-as", "command", "my_az")).err, /has no command \/my_az \(did you mean my_as\?\)/);
  });

  it("watch: a rebuilt plugin is reloaded, a failed build is reported (never the stale module), a new folder is picked up", async () => {
    const server = s!;
    const plugins = server.plugins;
    const watcher = watchPlugins(dir, async (name) => void (await plugins.refresh(name)), 3_600_000);
    try {
      const src = join(dir, "my-as", "plugin.ts");
      const original = readFileSync(src, "utf8");
      writeFileSync(src, original.replace('"hello from AssemblyScript"', '"hi again from AssemblyScript"'));
      assert.equal(buildPlugins([join(dir, "my-as")]).ok, true);
      assert.deepEqual(await watcher.scan(), ["my-as"]);
      assert.equal((await command(server, "my_as", {})).body.output, "hi again from AssemblyScript (greeting #3)", "reloaded, KV kept");

      writeFileSync(src, original + "\nexport function broken(): i32 { return nope; }\n");
      assert.equal(buildPlugins([join(dir, "my-as")]).ok, false);
      await watcher.scan();
      const info = (await server.api("GET", "/v1/plugins/my-as")).body.plugin;
      assert.equal(info.status, "failed");
      assert.match(info.reason, /the last build failed: .*nope/);
      assert.ok((await command(server, "my_as", {})).status >= 400, "the old module does not keep answering");
      const logs = (await server.api("GET", "/v1/plugins/my-as/logs")).body.logs;
      assert.match(logs.at(-1).message, /reload failed: the last build failed/);

      writeFileSync(src, original);
      assert.equal(buildPlugins([join(dir, "my-as")]).ok, true);
      await watcher.scan();
      assert.equal((await server.api("GET", "/v1/plugins/my-as")).body.plugin.status, "active");

      assert.equal((await cli("plugins", "new", "late-one", "--dir", dir)).code, 0);
      assert.ok((await watcher.scan()).includes("late-one"));
      assert.equal((await server.api("GET", "/v1/plugins/late-one")).body.plugin.status, "disabled", "listed (not in plugins.enabled)");
      assert.equal((await server.api("POST", "/v1/plugins/late-one/enable", {})).body.plugin.status, "active");
      // It runs; the operator granted it no kv, so its KV read is denied (grants come from the config only).
      assert.match(JSON.stringify((await command(server, "late_one", { raw_args: "x" })).body), /denied.*the operator has not granted to late-one \(config plugins\.grants\.late-one\)/);

      // Enabled in the database by another process (`hookbox plugins enable` on the same db) after
      // this server saw the folder: active at the folder's next change (it stayed disabled).
      assert.equal((await cli("plugins", "new", "later-two", "--dir", dir)).code, 0);
      assert.ok((await watcher.scan()).includes("later-two"));
      assert.equal((await server.api("GET", "/v1/plugins/later-two")).body.plugin.status, "disabled");
      await new PluginStateStore(server.core.storage, Date.now).save("later-two", { enabled: 1, quarantined: null });
      assert.equal(buildPlugins([join(dir, "later-two")]).ok, true);
      assert.ok((await watcher.scan()).includes("later-two"));
      assert.equal((await server.api("GET", "/v1/plugins/later-two")).body.plugin.status, "active");

      // A removed folder the configuration still names: the next start would refuse it, said now.
      const lines: string[] = [];
      const write = process.stderr.write;
      process.stderr.write = ((chunk: string) => (lines.push(String(chunk)), true)) as typeof process.stderr.write;
      setLogLevel("warn");
      try {
        rmSync(join(dir, "my-as"), { recursive: true, force: true });
        assert.deepEqual(await watcher.scan(), ["my-as"]);
      } finally {
        setLogLevel("silent");
        process.stderr.write = write;
      }
      assert.equal((await server.api("GET", "/v1/plugins/my-as")).status, 404);
      assert.match(lines.join(""), /"level":"warn","msg":"plugin removed; the configuration still names it, so the next start refuses it until it is put back or taken out","plugin":"my-as","in":"plugins.enabled, plugins.grants"/);
    } finally {
      watcher.close();
    }
  });
});

// Found by an outside probe: a plugin folder that is a symlink (a deploy that swaps a link) was
// skipped without a word, at start and by the watcher.
describe("plugin folders that are symlinks", () => {
  it("a symlinked plugin folder loads, and the watcher reloads it when the link is swapped (or its manifest breaks)", async () => {
    const deploys = mkdtempSync(join(tmpdir(), "hookbox-deploys-"));
    const dir = pluginDir();
    for (const v of ["v1", "v2"]) cpSync(join(SEED_DIR, "text-stats"), join(deploys, v), { recursive: true });
    const manifest = JSON.parse(readFileSync(join(deploys, "v2", "manifest.json"), "utf8"));
    writeFileSync(join(deploys, "v2", "manifest.json"), JSON.stringify({ ...manifest, version: "2.0.0" }));
    symlinkSync(join(deploys, "v1"), join(dir.path, "text-stats"));
    const server = await startPluginServer({ dir: dir.path, enabled: ["text-stats"] });
    const watcher = watchPlugins(dir.path, async (name) => void (await server.plugins.refresh(name)), 3_600_000);
    try {
      const info = async () => (await server.api("GET", "/v1/plugins/text-stats")).body.plugin;
      assert.deepEqual([(await info()).status, (await info()).version], ["active", manifest.version]);
      symlinkSync(join(deploys, "v2"), join(dir.path, "next"));
      renameSync(join(dir.path, "next"), join(dir.path, "text-stats"));
      assert.deepEqual(await watcher.scan(), ["text-stats"]);
      assert.deepEqual([(await info()).status, (await info()).version], ["active", "2.0.0"]);
      // A reload whose manifest is broken shows none of the manifest read before.
      writeFileSync(join(deploys, "v2", "manifest.json"), "{broken");
      assert.deepEqual(await watcher.scan(), ["text-stats"]);
      const failed = await info();
      assert.deepEqual([failed.status, failed.version, failed.tools, failed.capabilities.requested], ["failed", null, [], []]);
    } finally {
      watcher.close();
      await server.close();
      dir.remove();
      rmSync(deploys, { recursive: true, force: true });
    }
  });
});

describe("hookbox plugins call: hook outputs as the server checks them, plugin tools", () => {
  let dir = "";
  before(() => void (dir = mkdtempSync(join(tmpdir(), "hookbox-call-"))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("an output the server would refuse fails as bad_output, not ok", async () => {
    loopDir = HOSTILE_DIR;
    const payload = join(dir, "payload.json");
    writeFileSync(payload, JSON.stringify({ session_id: "s-1", user_message: "hi", conversation_history: [], platform: "cli" }));
    const r = await cli("plugins", "call", "badjson", "pre_llm_call", "--payload", payload);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /badjson pre_llm_call: FAILED \(bad_output\)/);
    // The output it refused, and the fuel the call took, are what the author needs to see (an outside
    // probe got "output: (none)" and "fuel: -").
    assert.match(r.out, /^output: \{"context": "unterminated$/m);
    assert.match(r.out, /^fuel: [1-9]\d* /m);
  });

  it("runs a plugin tool with arguments from --payload, checked against its schema first", async () => {
    loopDir = SEED_DIR;
    const args = join(dir, "args.json");
    writeFileSync(args, JSON.stringify({ text: "one two\nthree" }));
    const r = await cli("plugins", "call", "text-stats", "tool", "text_stats", "--payload", args);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /text-stats tool_text_stats: ok/);
    assert.match(r.out, /^output: {"words":3,"lines":2,"chars":13}$/m);
    writeFileSync(args, JSON.stringify({ txt: "x" }));
    const bad = await cli("plugins", "call", "text-stats", "tool", "text_stats", "--payload", args);
    assert.equal(bad.code, 2, bad.out); // bad input: a usage error
    assert.match(bad.err, /arguments do not match text_stats's parameters: .*text/);
    assert.match((await cli("plugins", "call", "text-stats", "tool", "text_stat")).err, /has no tool text_stat \(did you mean text_stats\?\)/);
  });
});
