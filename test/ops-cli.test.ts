// The operator's command line: per-subcommand --help, one-line errors with a hint, missing ids named,
// --dry-run for every sweep, sessions show|messages|unarchive, `turn`, `config` and `plugins reset`.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../runtime/cli.ts";
import { ConfigError, ENV_SETTINGS, checkCommandUsers, checkPluginNames, loadConfig, maskSecrets, parseConfig } from "../runtime/config.ts";
import { logThreshold } from "../runtime/log.ts";
import { parseManifest } from "../runtime/plugins/manifest.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { seed } from "./helpers/seed.ts";

describe("hookbox CLI (operator)", () => {
  let t: TestServer;
  let clock = 1_000_000_000_000;
  before(async () => {
    t = await startTestServer({ now: () => clock });
  });
  after(() => t.close());

  async function cli(...argv: string[]) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l) }, { core: t.core });
    return { code, out: out.join("\n"), err: err.join("\n") };
  }
  const create = async (body: object = {}) => (await t.api("POST", "/v1/sessions", body)).body.session.id as string;
  const exists = async (id: string) => (await t.api("GET", `/v1/sessions/${id}`)).status === 200;

  it("prints help for every subcommand with exit 0", async () => {
    for (const argv of [["--help"], ["sessions", "--help"], ["sessions", "delete", "--help"], ["sessions", "sweep", "prune", "--help"], ["plugins", "reset", "--help"], ["turn", "--help"], ["config", "--help"]]) {
      const r = await cli(...argv);
      assert.equal(r.code, 0, argv.join(" "));
      assert.match(r.out, new RegExp(`^Usage: hookbox ${argv.slice(0, -1).join(" ")}`), argv.join(" "));
    }
    assert.match((await cli("sessions", "sweep", "prune", "--help")).out, /--older-than-days <n>[\s\S]*--dry-run/);
    const version = await cli("--version");
    assert.deepEqual([version.code, version.out], [0, JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version]);
  });

  it("prints one line plus a hint for a usage error (exit 2), not the whole usage", async () => {
    for (const [argv, line] of [
      [["sessions", "list", "--bogus"], /^hookbox: unknown option '--bogus'$/],
      [["sesions"], /^hookbox: unknown command 'sesions' \(Did you mean sessions\?\)$/],
      [["sessions", "sweep", "prune", "--grace-seconds", "3"], /^hookbox: unknown option '--grace-seconds'$/],
      [["sessions", "list", "--limit", "0"], /^hookbox: option '--limit <n>' argument '0' is invalid/],
      [["compress", "s_x", "--kind", "micro_summarize", "--rotate"], /^hookbox: --rotate applies to --kind summarize only$/],
      // A session id the API would answer 400 invalid_id to (it was "not found", exit 1).
      [["sessions", "show", "bad id"], /^hookbox: command-argument value 'bad id' is invalid for argument 'id'\. not a session id: ids are 1-128 chars/],
      [["sessions", "delete", "s_ok", "bad/id"], /^hookbox: command-argument value 'bad\/id' is invalid for argument 'ids'\. not a session id/],
    ] as const) {
      const r = await cli(...argv);
      assert.equal(r.code, 2, argv.join(" "));
      const lines = r.err.split("\n");
      assert.equal(lines.length, 2, r.err);
      assert.match(lines[0]!, line);
      assert.match(lines[1]!, /^hint: run "(npm run hookbox --|deno task hookbox) .*--help" for usage$/);
    }
  });

  it("delete, archive and unarchive of a missing id fail naming it (exit 1) and change nothing", async () => {
    const a = await create();
    for (const sub of ["delete", "archive", "unarchive"]) {
      const r = await cli("sessions", sub, a, "s_missing1");
      assert.equal(r.code, 1, sub);
      assert.equal(r.err, "hookbox: session s_missing1 not found; nothing was done to the others");
    }
    assert.equal(await exists(a), true);
    assert.equal((await t.api("GET", `/v1/sessions/${a}`)).body.session.archived, false);
    assert.equal((await cli("sessions", "archive", a)).out, `archived ${a}`);
    assert.equal((await cli("sessions", "unarchive", a)).out, `unarchived ${a}`);
    assert.equal((await t.api("GET", `/v1/sessions/${a}`)).body.session.archived, false);
  });

  it("--dry-run for every sweep lists what would go and changes nothing", async () => {
    const old = await create();
    const child = await create({ parent_session_id: old });
    await seed(t.core, child, [["user", "hi"]]);
    clock += 400 * 86_400_000;
    const cases: Array<[string[], RegExp]> = [
      [["empty_sweep"], /empty_sweep: \d+ would be deleted \(dry run, nothing changed\)/],
      [["prune", "--older-than-days", "1"], new RegExp(`would delete ${child}[\\s\\S]*prune: \\d+ would be deleted \\(dry run, nothing changed\\)`)],
      [["ghost_prune"], /ghost_prune: \d+ would be deleted/],
      [["profile_repair"], /profile_repair: \d+ would be deleted/],
      [["idle_archive", "--older-than-days", "1"], new RegExp(`would archive ${old}[\\s\\S]*idle_archive: \\d+ would be archived`)],
      [["idle_archive"], /^idle_archive: off \(retention\.idle_archive_after_days is 0\); --older-than-days N runs it once$/],
    ];
    for (const [argv, want] of cases) {
      const r = await cli("sessions", "sweep", ...argv, "--dry-run");
      assert.equal(r.code, 0, argv.join(" "));
      assert.match(r.out, want, argv.join(" "));
    }
    // the dry prune listed the parent with its cascaded child; nothing was deleted or archived
    assert.match((await cli("sessions", "sweep", "prune", "--older-than-days", "1", "--dry-run")).out, new RegExp(`would delete ${old}`));
    assert.equal(await exists(old), true);
    assert.equal(await exists(child), true);
    assert.equal((await t.api("GET", `/v1/sessions/${old}`)).body.session.archived, false);
    const real = await cli("sessions", "sweep", "prune", "--older-than-days", "1");
    assert.match(real.out, new RegExp(`deleted ${child}`));
    assert.equal(await exists(old), false);
  });

  it("shows a session and its messages, runs a turn, and says why compress did nothing", async () => {
    const s = await create({ platform: "cli" });
    const turn = await cli("turn", s, "calc", "(2+3)*4");
    assert.equal(turn.code, 0, turn.err);
    assert.match(turn.out, /20/);
    const show = await cli("sessions", "show", s);
    assert.equal(JSON.parse(show.out).id, s);
    const msgs = await cli("sessions", "messages", s);
    assert.match(msgs.out, /^1\tuser\tcalc \(2\+3\)\*4/);
    assert.ok(JSON.parse((await cli("sessions", "messages", s, "--json")).out).length >= 2);
    // Control characters print as escapes: a message cannot clear the screen or forge a line.
    const escapes = await create();
    await seed(t.core, escapes, [["user", "a\u001b[2Jb\nc\u202ed"]]);
    assert.equal((await cli("sessions", "messages", escapes)).out, "1\tuser\ta\\u001b[2Jb\\u000ac\\u202ed");
    assert.equal(JSON.parse((await cli("sessions", "messages", escapes, "--json")).out)[0].content, "a\u001b[2Jb\nc\u202ed", "--json keeps the text");
    // An answer keeps its lines, not its escape sequences.
    assert.match((await cli("turn", escapes, "x\u001b]52;c;AAAA\u0007y")).out, /x\\u001b\]52;c;AAAA\\u0007y/);
    const none = await cli("compress", s);
    assert.equal(none.code, 0);
    assert.match(none.out, /^nothing compacted \(empty\): .*kept as they are/);
    assert.equal((await cli("sessions", "show", "s_missing2")).code, 1);
    assert.equal((await cli("turn", "s_missing3", "hello")).code, 1);
    // An unknown /command is an answer (the API's 404), not a crash of the CLI (an outside probe).
    const unknown = await cli("turn", s, "/nosuch");
    assert.deepEqual([unknown.code, unknown.err.trim()], [1, "hookbox: unknown command /nosuch; /commands lists them"]);
    // The message rules of POST .../turns: nothing is stored for an empty or overlong message.
    const empty = await cli("turn", s, "");
    assert.equal(empty.code, 2, "bad input to the command: a usage error");
    assert.match(empty.err, /invalid message: .*1/);
    assert.match((await cli("turn", s, "x".repeat(100_001))).err, /invalid message: .*100000/);
    assert.equal(JSON.parse((await cli("sessions", "messages", s, "--json")).out).length, 3, "the first turn's three messages only");
    // A command's own flags are the message's, unquoted (they failed as "unknown option '--delete'").
    const gone = await create({ platform: "cli" });
    const exit = await cli("turn", gone, "/exit", "--delete");
    assert.equal(exit.code, 0, exit.err);
    assert.equal((await cli("sessions", "show", gone)).code, 1, "ended and deleted");
  });

  it("plugins reset clears persisted enable/disable overrides", async () => {
    const db = t.core.storage.db;
    await db.insertInto("plugin_state").values([
      { name: "a", enabled: 0, quarantined: null, updated_at: 1 },
      { name: "b", enabled: 1, quarantined: "x", updated_at: 1 },
    ]).execute();
    const one = await cli("plugins", "reset", "a");
    assert.match(one.out, /override cleared: a\n1 override\(s\) cleared/);
    assert.deepEqual((await db.selectFrom("plugin_state").select(["name", "enabled", "quarantined"]).orderBy("name").execute()), [
      { name: "a", enabled: null, quarantined: null },
      { name: "b", enabled: 1, quarantined: "x" },
    ]);
    assert.match((await cli("plugins", "reset")).out, /override cleared: b/);
    // A name that is no plugin and has no override is an error, as for enable (a typo cleared nothing).
    const typo = await cli("plugins", "reset", "whoamii");
    assert.equal(typo.code, 1);
    assert.match(typo.err, /plugin whoamii not found/);
    // A profile the API would refuse is refused here too, not listed as nothing.
    const bad = await cli("sessions", "list", "--profile", "bad name");
    assert.equal(bad.code, 2);
    assert.match(bad.err, /invalid --profile: profiles are 1-64 chars/);
    // As a cursor the API refuses (400): exit 2, with the hint, where it was 1.
    const cursor = await cli("sessions", "list", "--after", "garbage");
    assert.equal(cursor.code, 2, cursor.err);
    assert.match(cursor.err, /after "garbage" is neither a page cursor[^]*hint: run "(npm run hookbox --|deno task hookbox) sessions list --help"/);
  });
});

describe("configuration (operator)", () => {
  it("takes every setting from an environment variable, provider key included", () => {
    const c = parseConfig(
      { provider: { type: "openai", base_url: "http://127.0.0.1:1/v1", model: "m" } },
      { HOOKBOX_PROVIDER_API_KEY: "sk-env", HOOKBOX_COMPACTION_KEEP_RECENT_MESSAGES: "7", HOOKBOX_PLUGINS_GRANTS: '{"whoami":["kv"]}', HOOKBOX_SHUTDOWN_GRACE_SECONDS: "3" },
    );
    assert.equal(c.provider.type === "openai" && c.provider.api_key, "sk-env");
    assert.equal(c.compaction.keep_recent_messages, 7);
    assert.deepEqual(c.plugins.grants, { whoami: ["kv"] });
    assert.equal(c.shutdown_grace_seconds, 3);
    const names = ENV_SETTINGS.map((s) => s.env);
    for (const name of ["HOOKBOX_DB_URL", "HOOKBOX_API_TOKEN", "HOOKBOX_PROVIDER_API_KEY", "HOOKBOX_PROVIDER_BASE_URL", "HOOKBOX_PLUGINS_ENABLED", "HOOKBOX_IDEMPOTENCY_TTL_SECONDS"]) {
      assert.ok(names.includes(name), name);
    }
    // Every setting has its variable (found by an outside probe: the one whose value is 0 or an age,
    // a union, had none, and the warning pointed at the prune age instead).
    const leaves = (o: object, path: string[] = []): string[] =>
      Object.entries(o).flatMap(([k, x]) => (x && typeof x === "object" && !Array.isArray(x) && Object.keys(x).length > 0 ? leaves(x, [...path, k]) : [[...path, k].join(".")]));
    const settable = new Set(ENV_SETTINGS.map((s) => s.path.join(".")));
    const { warnings: _, ...defaults } = parseConfig({});
    assert.deepEqual(leaves(defaults).filter((p) => !settable.has(p)), []);
    assert.equal(parseConfig({}, { HOOKBOX_RETENTION_IDLE_ARCHIVE_AFTER_DAYS: "2" }).retention.idle_archive_after_days, 2);
    assert.throws(() => parseConfig({}, { HOOKBOX_RETENTION_IDLE_ARCHIVE_AFTER_DAYS: "0.001" }), /HOOKBOX_RETENTION_IDLE_ARCHIVE_AFTER_DAYS \(retention\.idle_archive_after_days\): must be 0 \(off\) or at least 1 hour/);
    assert.throws(() => parseConfig({}, { HOOKBOX_PORT: "http" }), /HOOKBOX_PORT \(port\): /);
    // Plain decimals only (0x10 was read as 16, 1e4 as 10000).
    for (const port of ["0x10", "1e4", "12abc"]) assert.throws(() => parseConfig({}, { HOOKBOX_PORT: port }), /HOOKBOX_PORT \(port\): /, port);
    assert.equal(parseConfig({}, { HOOKBOX_PORT: " 8080 " }).port, 8080);
    assert.equal(parseConfig({ $schema: "./hookbox.schema.json", port: 9 }).port, 9, "an editor's $schema is no setting");
    // A bad value from the environment is not blamed on the config file; one from the file is.
    assert.throws(() => parseConfig({ port: 80 }, { HOOKBOX_PORT: "http" }, "hookbox.config.json"), (e: Error) => /^environment: HOOKBOX_PORT \(port\): /.test(e.message));
    assert.throws(() => parseConfig({ port: "http" }, {}, "hookbox.config.json"), (e: Error) => /^hookbox\.config\.json: port: /.test(e.message));
    // Inside a JSON variable's value too; a warning about a variable's value names the variable.
    assert.throws(
      () => parseConfig({}, { HOOKBOX_PLUGINS_GRANTS: '{"whoami":["kvv"]}' }, "hookbox.config.json"),
      (e: Error) => /^environment: HOOKBOX_PLUGINS_GRANTS \(plugins\.grants\.whoami\.0\): unknown capability "kvv"/.test(e.message),
    );
    assert.deepEqual(parseConfig({}, { HOOKBOX_PLUGINS_HOOK_CALLBACK_TIMEOUT: "9999" }, "hookbox.config.json").warnings, [
      "HOOKBOX_PLUGINS_HOOK_CALLBACK_TIMEOUT: plugins.hook_callback_timeout 9999 is above 600 s; clamped to 600",
    ]);
    // A setting missing from an object only the environment made is the environment's to fix.
    assert.throws(
      () => parseConfig({}, { HOOKBOX_PROVIDER_TYPE: "openai" }, "hookbox.config.json"),
      (e: Error) => /^environment: HOOKBOX_PROVIDER_TYPE \(provider\.base_url\): /.test(e.message),
    );
    assert.throws(() => parseConfig({ provider: { type: "openai" } }, {}, "hookbox.config.json"), (e: Error) => /^hookbox\.config\.json: provider\.base_url: /.test(e.message));
    // A file holding an array is not a config (valibot alone would take it for an empty object).
    assert.throws(() => parseConfig([], {}, "d.json"), (e: Error) => /^d\.json: \(root\): must be a JSON object, not an array/.test(e.message));
    assert.equal(parseConfig({}, { HOOKBOX_DB_SYNCHRONOUS: "NORMAL" }).db_synchronous, "normal");
    // A path without a scheme is refused with the fix, not opened as a URL that fails later.
    assert.throws(() => parseConfig({}, { HOOKBOX_DB_URL: "./data/hookbox.db" }), /HOOKBOX_DB_URL \(db_url\): "\.\/data\/hookbox\.db" is not a database URL: file:PATH for an embedded file \(e\.g\. file:\.\/data\/hookbox\.db\)/);
    // A URL of another scheme is not a path: no "file:" suggestion made of it (an outside probe saw "e.g. file:postgres://x").
    assert.throws(() => parseConfig({}, { HOOKBOX_DB_URL: "postgres://x" }), (err: Error) => /"postgres:\/\/x" is not a database hookbox can open: file:PATH/.test(err.message) && !/e\.g\./.test(err.message));
    for (const url of ["file:./x.db", "libsql://db.example", "http://127.0.0.1:8080", "wss://db.example"]) assert.equal(parseConfig({ db_url: url }).db_url, url);
    // The README documents every variable.
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    assert.deepEqual(names.filter((n) => !readme.includes(`\`${n}\``)), []);
  });

  it("refuses unknown keys, capabilities and plugin names with a suggestion", () => {
    assert.throws(() => parseConfig({ plugins: { enabeld: [] } }), (e: Error) => e instanceof ConfigError && /plugins\.enabeld: unknown field "enabeld" \(did you mean enabled\?\)/.test(e.message));
    assert.throws(() => parseConfig({ plugins: { grants: { whoami: ["KV"] } } }), /plugins\.grants\.whoami\.0: unknown capability "KV" \(did you mean kv\?\)/);
    // A key of the other provider type is unknown for this one, said with this type's own fields.
    assert.throws(
      () => parseConfig({ provider: { type: "local", base_url: "http://127.0.0.1:1" } }),
      (e: Error) => /provider\.base_url: unknown field "base_url"; allowed: type, context_window_tokens, native_compaction_over_tokens$/.test(e.message),
    );
    assert.throws(() => parseConfig({ provider: { type: "openai", base_url: "http://127.0.0.1:1", model: "m", context_window_tokens: 9 } }), /provider\.context_window_tokens: unknown field .*allowed: type, base_url, api_key, model, timeout_seconds/);
    const c = parseConfig({ plugins: { enabled: ["whoami", "sidecar-indx"], grants: { tasktracker: ["kv"] } } });
    assert.throws(
      () => checkPluginNames(c, ["whoami", "sidecar-index", "task-tracker"]),
      /plugins\.enabled: no plugin named "sidecar-indx" .*\(did you mean sidecar-index\?\); plugins\.grants: no plugin named "tasktracker" .*\(did you mean task-tracker\?\)/,
    );
    assert.doesNotThrow(() => checkPluginNames(parseConfig({ plugins: { enabled: ["whoami"] } }), ["whoami"]));
    // A misspelt command in command_users would leave the sensitive command open to every user.
    const users = parseConfig({ plugins: { command_users: { gaurd: ["admin"] } } });
    assert.throws(() => checkCommandUsers(users, { names: ["guard", "task"], unreadable: [] }), /plugins\.command_users: no plugin in .* declares a command "gaurd" \(did you mean guard\?\)/);
    assert.doesNotThrow(() => checkCommandUsers(parseConfig({ plugins: { command_users: { guard: ["admin"] } } }), { names: ["guard"], unreadable: [] }));
    assert.throws(() => checkCommandUsers(users, { names: [], unreadable: ["broken"] }), /unreadable manifest\.json in: broken/);
    // Keys every object has are refused, not dropped unseen (a plugin "constructor" kept no limit).
    for (const map of ["command_users", "grants", "limits"]) {
      assert.throws(() => parseConfig(JSON.parse(`{"plugins":{"${map}":{"constructor":${map === "limits" ? "{}" : "[]"}}}}`)), new RegExp(`plugins\\.${map}: "constructor" cannot name a plugin or command`), map);
    }
    assert.throws(() => parseConfig(JSON.parse('{"plugins":{"grants":{"__proto__":["kv"]}}}')), /"__proto__" cannot name/);
    assert.throws(() => parseConfig({ plugins: { enabled: ["prototype"] } }), /"prototype" cannot name a plugin/);
  });

  it("a config file that is missing or not JSON is named, with what is wrong with it", () => {
    const dir = mkdtempSync(join(tmpdir(), "hookbox-config-"));
    const missing = join(dir, "nope.json");
    assert.throws(() => loadConfig({ HOOKBOX_CONFIG: missing }), (err: unknown) => err instanceof ConfigError && err.message === `HOOKBOX_CONFIG names ${missing}, which does not exist`);
    const truncated = join(dir, "cut.json");
    writeFileSync(truncated, '{"port": 8');
    assert.throws(() => loadConfig({ HOOKBOX_CONFIG: truncated }), (err: unknown) => err instanceof ConfigError && err.message.startsWith(`${truncated} is not valid JSON: `));
  });

  it("a provider setting without a type is the local provider's; a HOOKBOX_ variable that is no setting is reported", () => {
    const c = parseConfig({}, { HOOKBOX_PROVIDER_CONTEXT_WINDOW_TOKENS: "1000" });
    assert.deepEqual(c.provider, { type: "local", context_window_tokens: 1000 });
    assert.throws(
      () => parseConfig({}, { HOOKBOX_PROVIDER_TIMEOUT_SECONDS: "30" }),
      /provider\.type is missing: HOOKBOX_PROVIDER_TIMEOUT_SECONDS is a setting of the "openai" provider \(set provider\.type or HOOKBOX_PROVIDER_TYPE=openai\)/,
    );
    assert.throws(() => parseConfig({ retention: { prune_after_days: 0 } }), /retention\.prune_after_days: must be at least 1 hour/);
    // Above 0 but archiving every session at each hourly run (a review of the prune fix).
    assert.throws(() => parseConfig({ retention: { idle_archive_after_days: 1e-300 } }), /idle_archive_after_days: must be 0 \(off\) or at least 1 hour/);
    assert.equal(parseConfig({ retention: { idle_archive_after_days: 0 } }).retention.idle_archive_after_days, 0);
    const typo = parseConfig({}, { HOOKBOX_PLUGINS_ENABLE: "text-stats", HOOKBOX_LOG: "error" });
    assert.deepEqual(typo.plugins.enabled, []);
    assert.deepEqual(typo.warnings, ["HOOKBOX_PLUGINS_ENABLE is not a hookbox setting and is ignored (did you mean HOOKBOX_PLUGINS_ENABLED?)"]);
    // HOOKBOX_LOG is read before any config: a level it does not name is said (and info is used).
    assert.deepEqual(logThreshold("verbose"), { level: logThreshold("info").level, problem: "HOOKBOX_LOG=verbose is not a log level (debug, info, warn, error, silent); using info" });
    assert.deepEqual(logThreshold("WARN"), logThreshold("warn"));
  });

  it("`hookbox config --env` lists every variable: the process's two, then each setting's", async () => {
    const out: string[] = [];
    assert.equal(await runCli(["config", "--env"], { out: (l) => out.push(l), err: (l) => out.push(l) }), 0);
    assert.deepEqual(out.slice(0, 2).map((l) => l.split("\t")[0]), ["HOOKBOX_CONFIG", "HOOKBOX_LOG"]);
    assert.ok(out.includes("HOOKBOX_PLUGINS_KV_QUOTA_KEYS\tplugins.kv_quota.keys"));
  });

  it("`hookbox config` prints the effective configuration with secrets masked", async () => {
    const config = parseConfig(
      { db_url: "libsql://user:pw@db.example:8080?authToken=abc", provider: { type: "openai", base_url: "http://127.0.0.1:1/v1", model: "m" } },
      { HOOKBOX_API_TOKEN: "tok-secret", HOOKBOX_PROVIDER_API_KEY: "sk-secret", HOOKBOX_DB_AUTH_TOKEN: "dbsecret" },
    );
    const out: string[] = [];
    assert.equal(await runCli(["config"], { out: (l) => out.push(l), err: (l) => out.push(l) }, { config }), 0);
    const text = out.join("\n");
    for (const secret of ["tok-secret", "sk-secret", "dbsecret", "pw@", "abc"]) assert.ok(!text.includes(secret), secret);
    const printed = JSON.parse(text);
    assert.equal(printed.api_token, "***");
    assert.equal(printed.provider.api_key, "***");
    assert.equal(printed.provider.model, "m");
    assert.deepEqual(maskSecrets(parseConfig({})), JSON.parse(JSON.stringify(parseConfig({}))), "nothing to mask: unchanged");
    // What serve would refuse, `hookbox config` refuses too (exit 1, serve's own message), after printing.
    const typo = parseConfig({ plugins: { enabled: ["whoami", "whoamii"] } });
    const lines: string[] = [];
    assert.equal(await runCli(["config"], { out: (l) => lines.push(l), err: (l) => lines.push(l) }, { config: typo }), 1);
    assert.equal(lines.at(-1), 'hookbox: plugins.enabled: no plugin named "whoamii" in ./plugins-wasm (did you mean whoami?)');
    // A plugins.dir that does not exist is said (a mistyped path loaded no plugin, silently).
    const nowhere = parseConfig({ plugins: { dir: "/nonexistent-hookbox-plugins", enabled: [] } });
    const said: string[] = [];
    assert.equal(await runCli(["config"], { out: (l) => said.push(l), err: (l) => said.push(l) }, { config: nowhere }), 0);
    assert.deepEqual(JSON.parse(said.join("\n")).warnings, ["plugins.dir /nonexistent-hookbox-plugins does not exist: no plugin will load"]);
    // A file there is refused, naming the setting (it failed with a bare ENOTDIR from scandir).
    const notDir = join(mkdtempSync(join(tmpdir(), "hookbox-file-")), "plugins");
    writeFileSync(notDir, "a file");
    const file = parseConfig({ plugins: { dir: notDir, enabled: [] } });
    const told: string[] = [];
    assert.equal(await runCli(["config"], { out: (l) => told.push(l), err: (l) => told.push(l) }, { config: file }), 1);
    assert.equal(told.at(-1), `hookbox: plugins.dir (HOOKBOX_PLUGINS_DIR): ${notDir} is not a directory`);
    // A missing folder the configuration names plugins in: that cause, once (an outside probe got one
    // "no plugin named" per plugin, the cause only in a warning line above them).
    const gone = parseConfig({ plugins: { enabled: ["whoami", "task-tracker"], grants: { whoami: ["kv"] } } }, { HOOKBOX_PLUGINS_DIR: "/nonexistent-hookbox-plugins" });
    const why: string[] = [];
    assert.equal(await runCli(["config"], { out: (l) => why.push(l), err: (l) => why.push(l) }, { config: gone }), 1);
    assert.equal(why.at(-1), "hookbox: environment: HOOKBOX_PLUGINS_DIR (plugins.dir): /nonexistent-hookbox-plugins does not exist, and plugins.enabled, plugins.grants name plugins in it");
  });

  // valibot takes an array for an object: "plugins": [] ran on the defaults, "grants": ["kv"] read a plugin "0".
  it("an array where the configuration or a manifest wants an object is refused, naming where", () => {
    for (const [input, path] of [[{ plugins: [] }, "plugins"], [{ compaction: [] }, "compaction"], [{ plugins: { grants: ["kv"] } }, "plugins.grants"], [{ plugins: { limits: { whoami: [] } } }, "plugins.limits.whoami"]] as const) {
      assert.throws(() => parseConfig(input as never), new RegExp(`^ConfigError: config: ${path.replaceAll(".", "\\.")}: must be a JSON object, not an array$`), path);
    }
    assert.throws(() => parseConfig({}, { HOOKBOX_PLUGINS_GRANTS: "[]" }), /environment: HOOKBOX_PLUGINS_GRANTS: plugins\.grants: must be a JSON object, not an array/);
    assert.throws(() => parseConfig({}, { HOOKBOX_PLUGINS_LIMITS: '{"x":[]}' }, "hookbox.json"), /^ConfigError: environment: HOOKBOX_PLUGINS_LIMITS: plugins\.limits\.x: must be/);
    assert.throws(() => parseManifest({ name: "x", version: "1", limits: [] }, "manifest.json"), /manifest\.json: limits: must be a JSON object, not an array/);
    assert.doesNotThrow(() => parseConfig({ plugins: { enabled: ["whoami"], grants: {} } }));
  });

  it("a plugin name the environment set is refused naming the variable; a fail-closed plugin that is not there is refused, not warned about", () => {
    const fromEnv = parseConfig({}, { HOOKBOX_PLUGINS_ENABLED: "whoami,nope" });
    assert.throws(() => checkPluginNames(fromEnv, ["whoami"]), /^ConfigError: environment: HOOKBOX_PLUGINS_ENABLED \(plugins\.enabled\): no plugin named "nope"/);
    // Only the variable that set a setting is named: the default plugins.dir is no variable's.
    assert.throws(() => checkPluginNames(fromEnv, [], false), /^ConfigError: plugins\.dir: \.\/plugins-wasm does not exist, and environment: HOOKBOX_PLUGINS_ENABLED \(plugins\.enabled\) name plugins in it$/);
    const closed = parseConfig({ plugins: { fail_closed: ["nope"] } });
    assert.throws(() => checkPluginNames(closed, ["whoami"]), /plugins\.fail_closed: no plugin named "nope"/);
    assert.deepEqual(closed.warnings, [], "no warning that it is not enabled first");
    const idle = parseConfig({ plugins: { fail_closed: ["whoami"] } });
    checkPluginNames(idle, ["whoami"]);
    assert.deepEqual(idle.warnings, ["plugins.fail_closed: whoami is not enabled, so it blocks every tool call"]);
  });
});
