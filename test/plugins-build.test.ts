// The built AssemblyScript plugins, called export by export through the real sandbox (fuel, memory
// and output limits) and the real host API (grants, KV in a temp libSQL file): manifests match the
// modules, the light JSON reader agrees with JSON.parse, output is correct UTF-8, each seed
// plugin's logic holds, and each hostile plugin is stopped by the limit it targets. The HTTP-level
// scenarios are in plugins-seed.test.ts.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { callFailure } from "./helpers/call-failure.ts";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Grants } from "../host-api/capabilities.ts";
import { HOST_FUNCTION_NAMES } from "../host-api/functions.ts";
import type { PluginKv } from "../host-api/kv.ts";
import { parseConfig } from "../runtime/config.ts";
import { setLogLevel } from "../runtime/log.ts";
import { effectiveLimits } from "../runtime/plugins/limits.ts";
import { compilePlugin, readManifest } from "../runtime/plugins/loader.ts";
import { createPluginInstance, DEFAULT_KV_QUOTA } from "../runtime/plugins/instance.ts";
import { KvStore } from "../runtime/storage/plugin-kv.ts";
import { parseManifest } from "../runtime/plugins/manifest.ts";
import { SANDBOX_FUNCTION_NAMES } from "../runtime/sandbox/imports.ts";
import { WasmPlugin } from "../runtime/sandbox/wasm-plugin.ts";
import { openStorage, type Storage } from "../runtime/storage/db.ts";

const PLUGINS_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "plugins-wasm");
const HOST_FUNCTIONS = new Set<string>([...HOST_FUNCTION_NAMES, ...SANDBOX_FUNCTION_NAMES]);

function pluginFolders(): string[] {
  const found: string[] = [];
  for (const base of ["", "hostile"]) {
    for (const e of readdirSync(join(PLUGINS_DIR, base), { withFileTypes: true })) {
      const rel = base ? `${base}/${e.name}` : e.name;
      if (e.isDirectory() && existsSync(join(PLUGINS_DIR, rel, "plugin.ts"))) found.push(rel);
    }
  }
  return found.sort();
}

/** One plugin in the real sandbox with the real host API over the shared test database. */
class Loaded {
  constructor(
    readonly sandbox: WasmPlugin,
    readonly kv: PluginKv,
  ) {}

  /** Calls export `fn` with a payload (JSON-encoded unless already a string); "" for no output. */
  async call(fn: string, payload: unknown): Promise<string> {
    const input = typeof payload === "string" ? payload : JSON.stringify(payload);
    const { output } = await this.sandbox.call(fn, input, Date.now() + 10_000);
    return output ?? "";
  }

  /** A hook delivery as the dispatcher builds it, plus a field from some future schema version. */
  async hook(hook: string, fields: Record<string, unknown>): Promise<string> {
    return this.call(hook, { hook, schema_version: 1, ...fields, future_field: { nested: ["}", "]"] } });
  }

  async command(name: string, call: Record<string, unknown>): Promise<any> {
    const out = await this.call(`command_${name}`, { raw_args: "", ...call });
    return out === "" ? null : JSON.parse(out);
  }
}

let tempDir: string;
const loaded: WasmPlugin[] = [];
const databases: Storage[] = [];
const stores = new Map<Storage, KvStore>();
const config = parseConfig({});

/** A fresh database: plugins loaded with the same name in different tests must not share KV. */
async function freshStorage(): Promise<Storage> {
  const storage = await openStorage(`file:${join(tempDir, `db-${databases.length}.db`)}`);
  databases.push(storage);
  stores.set(storage, KvStore.open(storage, { now: Date.now, onError: (_p, err) => assert.fail(String(err)) }));
  return storage;
}

async function load(rel: string, granted: string[] = ["kv"], storage?: Storage): Promise<Loaded> {
  storage ??= await freshStorage();
  const name = rel.split("/").pop()!;
  const path = join(PLUGINS_DIR, rel);
  const manifest = readManifest(path, name);
  const limits = effectiveLimits(name, manifest.limits, config);
  const { sandbox, kv } = await createPluginInstance({ name, path, manifest, limits, grants: new Grants(granted) }, { kv: stores.get(storage)!, quota: DEFAULT_KV_QUOTA });
  loaded.push(sandbox);
  return new Loaded(sandbox, kv);
}

after(async () => {
  await Promise.all(loaded.map((p) => p.close()));
  for (const s of stores.values()) await s.close();
  for (const db of databases) await db.close();
  if (tempDir) rmSync(tempDir, { recursive: true, force: true });
});

before(async () => {
  setLogLevel("silent");
  tempDir = mkdtempSync(join(tmpdir(), "hookbox-plugins-build-"));
});

before(() => {
  const missing = pluginFolders().filter((rel) => !existsSync(join(PLUGINS_DIR, rel, "plugin.wasm")));
  assert.deepEqual(missing, [], "plugins not built: run `npm run build:plugins`");
});

describe("built plugin modules", () => {
  it("finds the seed, hostile and fixture plugins", () => {
    const all = pluginFolders();
    for (const name of ["memory-reinject", "sidecar-index", "whoami", "task-tracker"]) assert.ok(all.includes(name), name);
    for (const name of ["loop", "membomb", "trap", "bigoutput", "badjson", "ungranted", "kvsnoop", "httpsnoop", "counter", "compute"]) {
      assert.ok(all.includes(`hostile/${name}`), name);
    }
  });

  for (const rel of pluginFolders()) {
    it(`${rel}: manifest name, exports and imports agree with the ABI`, async () => {
      // As the runtime reads it: defaults filled in, hooks this host does not know set aside.
      const manifest = parseManifest(JSON.parse(readFileSync(join(PLUGINS_DIR, rel, "manifest.json"), "utf8")), rel);
      assert.equal(manifest.name, rel.split("/").pop());
      const module = await WebAssembly.compile(readFileSync(join(PLUGINS_DIR, rel, "plugin.wasm")));
      const exports = new Set(WebAssembly.Module.exports(module).filter((e) => e.kind === "function").map((e) => e.name));
      for (const hook of manifest.hooks) assert.ok(exports.has(hook), `missing export ${hook}`);
      for (const c of manifest.commands) assert.ok(exports.has(`command_${c.name}`), `missing export command_${c.name}`);
      for (const t of manifest.tools) assert.ok(exports.has(`tool_${t.name}`), `missing export tool_${t.name}`);
      for (const imp of WebAssembly.Module.imports(module)) {
        if (imp.module === "extism:host/user") assert.ok(HOST_FUNCTIONS.has(imp.name), `unknown host function ${imp.name}`);
        else assert.equal(imp.module, "extism:host/env", `unexpected import ${imp.module}.${imp.name}`);
      }
    });
  }
});

describe("lib/json.ts light reader (jsonprobe)", () => {
  let probe: Loaded;
  before(async () => {
    probe = await load("hostile/jsonprobe", []);
  });

  const doc = {
    skip_me: { a: [1, { "}": "]" }, "x\"y"], b: { c: { d: "deep" } } },
    esc: 'quote " backslash \\ slash / nl \n tab \t cr \r bs \b ff \f ctl \u0001 end',
    uni: "héllo wörld ✓ 日本語 😀 𝄞",
    source: { user_id: "u-1", chat_id: null, nested: { user_id: "not me" } },
    deleted_ids: ["a", "b\"c", "d\\e", "ü😀", ""],
    mixed: ["s", 1, { k: "v" }, ["t"], null, "z"],
    n: -12.5e2,
    i: 42,
    zero: 0,
    t: true,
    nul: null,
    empty: "",
    "we\"ird key": "found",
    "ké": "non-ascii key",
    last: "tail",
  };
  const spaced = JSON.stringify(doc, null, 3).replace(/:/g, " :\t");

  function lookup(path: string): unknown {
    let v: any = doc;
    for (const p of path.split(".")) v = v?.[p];
    return v;
  }

  for (const [label, text] of [["compact", JSON.stringify(doc)], ["whitespace-heavy", spaced]] as const) {
    it(`strings (${label}): escapes, unicode, nested, odd keys`, async () => {
      for (const path of ["esc", "uni", "source.user_id", "skip_me.b.c.d", "we\"ird key", "ké", "last", "empty"]) {
        assert.equal(JSON.parse(await probe.call("get_string", `${path}\n${text}`)), lookup(path), path);
      }
      // Wrong type, null, missing key, missing parent: all "absent".
      for (const path of ["i", "nul", "source.chat_id", "missing", "nope.user_id", "skip_me", "mixed"]) {
        assert.equal(JSON.parse(await probe.call("get_string", `${path}\n${text}`)), null, path);
      }
    });

    it(`numbers and string arrays (${label})`, async () => {
      for (const path of ["n", "i", "zero"]) assert.equal(JSON.parse(await probe.call("get_number", `${path}\n${text}`)), lookup(path));
      for (const path of ["t", "esc", "missing"]) assert.equal(JSON.parse(await probe.call("get_number", `${path}\n${text}`)), null);
      assert.deepEqual(JSON.parse(await probe.call("get_string_array", `deleted_ids\n${text}`)), doc.deleted_ids);
      assert.deepEqual(JSON.parse(await probe.call("get_string_array", `mixed\n${text}`)), ["s", "z"]);
      assert.equal(JSON.parse(await probe.call("get_string_array", `uni\n${text}`)), null);
      assert.deepEqual(JSON.parse(JSON.parse(await probe.call("get_raw", `skip_me\n${text}`))), doc.skip_me);
    });
  }

  it("escaped keys match their decoded form; the first duplicate wins", async () => {
    assert.equal(JSON.parse(await probe.call("get_string", `ab\n{"x":1,"a\\u0062":"yes"}`)), "yes");
    assert.equal(JSON.parse(await probe.call("get_string", `k\n{"k":"first","k":"second"}`)), "first");
    assert.equal(JSON.parse(await probe.call("get_string", `pair\n{"pair":"\\ud83d\\ude00"}`)), "😀");
  });

  it("skips long strings whose quotes and backslashes fall at every offset of an 8-byte word", async () => {
    const fields: Record<string, string> = {};
    for (let k = 0; k < 24; k++) fields[`f${k}`] = `${"x".repeat(k)}"${"y".repeat(k % 9)}\\${"é".repeat(k % 5)}\\"${"z".repeat(17 + k)}`;
    const text = JSON.stringify({ ...fields, target: "found" });
    assert.equal(JSON.parse(await probe.call("get_string", `target\n${text}`)), "found");
    for (const k of [0, 1, 7, 8, 9, 15, 16, 23]) assert.equal(JSON.parse(await probe.call("get_string", `f${k}\n${text}`)), fields[`f${k}`], `f${k}`);
    // Unterminated after a long run: absent, not a read past the end.
    assert.equal(JSON.parse(await probe.call("get_string", `target\n{"a":"${"x".repeat(40)}`)), null);
  });

  it("malformed input reads as absent instead of trapping", async () => {
    for (const text of ['{"a":', '{"a":"unterminated', "[1,2]", "", '{"b":{"a":"x"', '"a"']) {
      assert.equal(JSON.parse(await probe.call("get_string", `a\n${text}`)), null, text);
    }
  });

  it("quote() escapes every string so JSON.parse gives it back (UTF-8 round trip)", async () => {
    const samples = ["", "plain", 'q"b\\s/', "\u0000\u0001\u001f\u007f", "é✓😀𝄞 日本", "\n\r\t\b\f", "x".repeat(5000) + "é"];
    for (const s of samples) assert.equal(JSON.parse(await probe.call("quote_input", s)), s);
  });
});

const START = { profile: "default", platform: "cli", source: { user_id: "u1", chat_id: "c1", thread_id: null } };
const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
function compaction(session_id: string, old_session_id: string, kind: string): Record<string, unknown> {
  return { session_id, old_session_id, kind, reason: "manual", before_tokens: 900, after_tokens: 100, messages_removed: null };
}
function deletion(reason: string, deleted_ids: string[]): Record<string, unknown> {
  return { session_id: deleted_ids[0] ?? "", reason, profile: "default", deleted_ids, sessions_dir: "./data/sessions" };
}
const preLlm = (session_id: string) => ({ session_id, conversation_history: [{ role: "user", content: "hi" }], user_message: "next" });

describe("memory-reinject", () => {
  it("re-injects the default conventions once on the new session after a rotating summarize", async () => {
    const p = await load("memory-reinject");
    assert.equal(await p.hook("pre_llm_call", preLlm("new")), "", "nothing before any compaction");
    await p.hook("post_compaction", compaction("new", "old", "summarize"));
    assert.equal(await p.hook("pre_llm_call", preLlm("old")), "", "the old id is not the live session");
    const injected = JSON.parse(await p.hook("pre_llm_call", preLlm("new")));
    assert.match(injected.context, /Project conventions/);
    assert.equal(await p.hook("pre_llm_call", preLlm("new")), "", "only once");
  });

  it("ignores non-summarizing kinds and handles in-place micro_summarize", async () => {
    const p = await load("memory-reinject");
    await p.hook("post_compaction", compaction("s1", "", "prune_tool_results"));
    await p.hook("post_compaction", compaction("s1", "", "provider_native"));
    assert.equal(await p.hook("pre_llm_call", preLlm("s1")), "");
    await p.hook("post_compaction", compaction("s1", "", "micro_summarize"));
    assert.ok(JSON.parse(await p.hook("pre_llm_call", preLlm("s1"))).context);
  });

  it("keeps the operator's conventions (non-ASCII intact) as its durable system-prompt section, not re-injected", async () => {
    const p = await load("memory-reinject");
    const text = 'Écrire des tests ✓ — "quoted" 😀\nline two';
    assert.deepEqual(await p.command("conventions", { raw_args: text }), { conventions: text });
    assert.equal(p.kv.get("", "hookbox.system_prompt"), `Project conventions: ${text}`);
    await p.hook("post_compaction", compaction("s2", "s1", "summarize"));
    assert.equal(await p.hook("pre_llm_call", preLlm("s2")), "", "already in every model call");
  });
});

describe("sidecar-index", () => {
  it("indexes sessions, follows a rotation and drops every deleted id", async () => {
    const p = await load("sidecar-index");
    for (let i = 0; i < 40; i++) await p.hook("on_session_start", { session_id: `s${i}`, ...START });
    await p.hook("post_llm_call", { session_id: "s0", response: "ok", usage });
    await p.hook("post_llm_call", { session_id: "late", response: "ok", usage }); // enabled mid-session
    await p.hook("post_compaction", compaction("s0b", "s0", "summarize"));
    const index = await p.command("index", {});
    assert.equal(index.count, 41);
    assert.ok(index.sessions.includes("s0b") && !index.sessions.includes("s0"));
    const entry = JSON.parse(p.kv.get("", "entry:s0b")!);
    assert.deepEqual(entry, {
      session_id: "s0b",
      platform: "cli",
      profile: "default",
      llm_calls: 1,
      compactions: 1,
      compacted_from: "s0",
    });

    const ids = ["s0", "s0b", ...Array.from({ length: 39 }, (_, i) => `s${i + 1}`)];
    await p.hook("on_session_delete", deletion("delete", ids));
    assert.deepEqual(p.kv.list("", ""), ["entry:late"]);
    assert.deepEqual(await p.command("index", {}), { count: 1, sessions: ["late"] });
  });
});

describe("whoami", () => {
  it("reports the caller's user, platform, session and session key", async () => {
    const p = await load("whoami", []);
    const out = await p.command("whoami", {
      session_id: "sess-1",
      session_key: "telegram:c1:",
      platform: "telegram",
      source: { user_id: "Zoë 😀", chat_id: "c1", thread_id: null },
    });
    assert.deepEqual(out, { user_id: "Zoë 😀", platform: "telegram", session_id: "sess-1", session_key: "telegram:c1:" });
  });

  it("reports null for whatever the call does not carry", async () => {
    const p = await load("whoami", []);
    assert.deepEqual(await p.command("whoami", { session_id: null, source: null }), {
      user_id: null,
      platform: null,
      session_id: null,
      session_key: null,
    });
  });
});

describe("task-tracker", () => {
  it("opens tasks per session; archive closes them, delete removes them", async () => {
    const p = await load("task-tracker");
    const a = await p.command("task", { raw_args: "  write the docs ✓ ", session_id: "A" });
    assert.deepEqual(a.opened, { id: 1, title: "write the docs ✓", session_id: "A", status: "open" });
    await p.command("task", { raw_args: "second", session_id: "A" });
    await p.command("task", { raw_args: "for B", session_id: "B" });
    await p.command("task", { raw_args: "for C", session_id: "C" });
    assert.deepEqual(await p.command("task", { raw_args: "orphan" }), { error: "/task needs a session" });

    await p.hook("on_session_delete", deletion("archive", ["A"]));
    await p.hook("on_session_delete", deletion("delete", ["C"]));
    const { tasks } = await p.command("task", { session_id: "B" });
    const byTitle = Object.fromEntries(tasks.map((t: any) => [t.title, t.status]));
    assert.deepEqual(byTitle, { "write the docs ✓": "closed", second: "closed", "for B": "open" });
  });
});

describe("example plugins a caller cannot break (an outside probe quarantined them with long arguments)", () => {
  it("task-tracker refuses a title over 1,000 bytes and lists at most 500 tasks, saying there are more", async () => {
    const p = await load("task-tracker");
    assert.deepEqual(await p.command("task", { raw_args: "x".repeat(1001), session_id: "A" }), { error: "a task title is at most 1000 bytes" });
    assert.equal((await p.command("task", { raw_args: "é".repeat(500), session_id: "A" })).opened.title.length, 500);
    for (let i = 1; i < 500; i++) await p.command("task", { raw_args: `task ${i} ${"y".repeat(900)}`, session_id: "A" });
    const all = await p.command("task", { session_id: "A" });
    assert.deepEqual([all.tasks.length, all.more], [500, undefined]);
    await p.command("task", { raw_args: "one more", session_id: "B" });
    const capped = await p.command("task", { session_id: "A" });
    assert.deepEqual([capped.tasks.length, capped.more], [500, true]);
  });

  it("tool-guard refuses a tool name longer than 128 bytes (a KV key holds 512) with an answer, not a failure", async () => {
    const p = await load("tool-guard");
    assert.deepEqual(await p.command("guard", { raw_args: "t".repeat(600) }), { error: "a tool name is at most 128 bytes" });
    assert.deepEqual(await p.command("guard", { raw_args: "-" + "t".repeat(600) }), { error: "a tool name is at most 128 bytes" });
    assert.deepEqual(await p.command("guard", { raw_args: "t".repeat(128) }), { blocked: ["t".repeat(128)] });
  });
});

describe("test fixtures", () => {
  it("counter counts every event per hook and returns nothing", async () => {
    const p = await load("hostile/counter");
    assert.equal(await p.hook("pre_llm_call", preLlm("s")), "");
    await p.hook("pre_llm_call", preLlm("s"));
    await p.hook("on_session_delete", deletion("delete", ["s"]));
    assert.deepEqual(await p.command("counts", {}), { pre_llm_call: 2, on_session_delete: 1 });
  });

  it("compute hashes N rounds deterministically", async () => {
    const p = await load("hostile/compute", []);
    let h = 0xcbf29ce484222325n;
    for (let i = 0n; i < 1000n; i++) h = ((h ^ (i & 0xffn)) * 0x100000001b3n) & 0xffffffffffffffffn;
    assert.deepEqual(await p.command("compute", { raw_args: "1000" }), { iterations: 1000, hash: h.toString(16) });
    assert.equal((await p.command("compute", { iterations: 7, raw_args: "1000" })).iterations, 7);
  });

  it("kvsnoop sees nothing of other plugins' or sessions' KV in the same database", async () => {
    const shared = await freshStorage();
    const sidecar = await load("sidecar-index", ["kv"], shared);
    await sidecar.hook("on_session_start", { session_id: "victim", ...START });
    const reinject = await load("memory-reinject", ["kv"], shared);
    await reinject.command("conventions", { raw_args: "secret conventions" });
    await reinject.hook("post_compaction", compaction("victim", "", "summarize"));
    await Promise.all([...stores.values()].map((s) => s.flush()));
    const snoop = await load("hostile/kvsnoop", ["kv"], shared);
    assert.deepEqual(await snoop.command("kvsnoop", { raw_args: "victim other", session_id: "mine" }), { own_ok: true, foreign: [] });
    const injected = JSON.parse(await snoop.hook("pre_llm_call", preLlm("victim")));
    assert.equal(injected.context, 'kvsnoop {"own_ok":true,"foreign":[]}');
  });
});

describe("hostile plugins under the real limits", () => {
  const pre = preLlm("s");
  it("loop runs out of fuel", async () => {
    assert.equal((await callFailure((await load("hostile/loop", [])).hook("pre_llm_call", pre))).kind, "fuel");
  });
  it("membomb hits the memory cap", async () => {
    assert.equal((await callFailure((await load("hostile/membomb", [])).hook("post_compaction", compaction("s", "", "summarize")))).kind, "memory");
  });
  it("trap traps, by unreachable and by abort", async () => {
    const p = await load("hostile/trap", []);
    assert.equal((await callFailure(p.hook("pre_llm_call", pre))).kind, "trap");
    assert.equal((await callFailure(p.hook("post_compaction", compaction("s", "", "summarize")))).kind, "trap");
  });
  it("bigoutput's 10 MiB is refused as bad output", async () => {
    const e = await callFailure((await load("hostile/bigoutput", [])).hook("pre_llm_call", pre));
    assert.equal(e.kind, "bad_output");
    assert.match(e.message, /10485760 bytes/);
  });
  it("badjson returns text that is not JSON (the dispatcher judges it)", async () => {
    const out = await (await load("hostile/badjson", [])).hook("pre_llm_call", pre);
    assert.throws(() => JSON.parse(out));
  });
  it("ungranted is denied kv, sessions and http even though its manifest asks", async () => {
    const p = await load("hostile/ungranted", []);
    for (const what of ["kv", "sessions", "http"]) {
      const e = await callFailure(p.command("ungranted", { raw_args: what }));
      assert.equal(e.kind, "denied", what);
    }
    assert.deepEqual(p.kv.list("", ""), []);
  });
  it("httpsnoop is denied every host but the granted one, however the URL mentions it", async () => {
    const p = await load("hostile/httpsnoop", ["http:example.com"]);
    for (const hook of ["pre_llm_call", "post_compaction", "on_session_delete"]) {
      assert.equal((await callFailure(p.hook(hook, { ...compaction("s", "", "summarize"), ...deletion("delete", ["s"]) }))).kind, "denied", hook);
    }
    const e = await callFailure(p.command("httpsnoop", { raw_args: "http://169.254.169.254/latest/meta-data/" }));
    assert.equal(e.kind, "denied");
  });
});
