// The built AssemblyScript plugins, called directly with @extism/extism in-thread: manifests match
// the modules' exports, the light JSON reader agrees with JSON.parse, output is correct UTF-8, and
// each seed plugin's logic works. Host functions are a small in-memory stand-in (per-plugin KV
// namespaces) because these tests are about the plugins; host-api is tested through the runtime.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import createPlugin, { type CallContext, type Plugin } from "@extism/extism";

const PLUGINS_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "plugins-wasm");
const HOST_FUNCTIONS = new Set([
  "hookbox_log",
  "hookbox_kv_get",
  "hookbox_kv_set",
  "hookbox_kv_delete",
  "hookbox_kv_list",
  "hookbox_session_messages",
  "hookbox_http",
]);

interface Manifest {
  name: string;
  hooks: string[];
  commands: Array<{ name: string }>;
  capabilities: string[];
}

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

/** One plugin's host side: its KV namespace ("session\0key" -> value), logs, and what it was denied. */
class StubHost {
  readonly kv = new Map<string, string>();
  readonly logs: string[] = [];
  readonly denied: string[] = [];
  constructor(private readonly granted: ReadonlySet<string>) {}

  private require(cap: string, fn: string): void {
    if (!this.granted.has(cap)) {
      this.denied.push(fn);
      throw new Error(`denied: ${fn} needs ${cap}`);
    }
  }

  functions(): Record<string, (cx: CallContext, ...args: any[]) => any> {
    const text = (cx: CallContext, off: bigint): string => cx.read(off)?.text() ?? "";
    const key = (cx: CallContext, s: bigint, k: bigint): string => `${text(cx, s)}\0${text(cx, k)}`;
    return {
      hookbox_log: (cx, _level: number, msg: bigint) => void this.logs.push(text(cx, msg)),
      hookbox_kv_get: (cx, s: bigint, k: bigint) => {
        this.require("kv", "hookbox_kv_get");
        const v = this.kv.get(key(cx, s, k));
        return v === undefined ? 0n : cx.store(v);
      },
      hookbox_kv_set: (cx, s: bigint, k: bigint, v: bigint) => {
        this.require("kv", "hookbox_kv_set");
        this.kv.set(key(cx, s, k), text(cx, v));
      },
      hookbox_kv_delete: (cx, s: bigint, k: bigint) => {
        this.require("kv", "hookbox_kv_delete");
        this.kv.delete(key(cx, s, k));
      },
      hookbox_kv_list: (cx, s: bigint, p: bigint) => {
        this.require("kv", "hookbox_kv_list");
        const scope = `${text(cx, s)}\0`;
        const prefix = text(cx, p);
        const keys = [...this.kv.keys()]
          .filter((k) => k.startsWith(scope) && k.slice(scope.length).startsWith(prefix))
          .map((k) => k.slice(scope.length))
          .sort();
        return cx.store(JSON.stringify(keys));
      },
      hookbox_session_messages: () => {
        this.require("sessions:read", "hookbox_session_messages");
        return 0n;
      },
      hookbox_http: () => {
        this.require("http", "hookbox_http");
        return 0n;
      },
    };
  }

  /** Plugin-wide KV keys (session ""), for assertions. */
  globalKeys(): string[] {
    return [...this.kv.keys()].filter((k) => k.startsWith("\0")).map((k) => k.slice(1)).sort();
  }
}

class Loaded {
  constructor(
    readonly plugin: Plugin,
    readonly host: StubHost,
  ) {}

  /** Calls `fn` with a JSON payload (objects get `hook`/`schema_version` like real deliveries). */
  async call(fn: string, payload: unknown): Promise<string> {
    const input = typeof payload === "string" ? payload : JSON.stringify(payload);
    const out = await this.plugin.call(fn, input);
    return out?.text() ?? "";
  }

  async hook(hook: string, fields: Record<string, unknown>): Promise<string> {
    return this.call(hook, { hook, schema_version: 1, ...fields, future_field: { nested: ["}", "]"] } });
  }

  async command(name: string, call: Record<string, unknown>): Promise<any> {
    const out = await this.call(`command_${name}`, { raw_args: "", ...call });
    return out === "" ? null : JSON.parse(out);
  }
}

const open: Plugin[] = [];
async function load(rel: string, granted: string[] = ["kv"]): Promise<Loaded> {
  const host = new StubHost(new Set(granted));
  const plugin = await createPlugin(
    { wasm: [{ data: readFileSync(join(PLUGINS_DIR, rel, "plugin.wasm")) }] },
    { useWasi: false, runInWorker: false, functions: { "extism:host/user": host.functions() } },
  );
  open.push(plugin);
  return new Loaded(plugin, host);
}

after(async () => {
  await Promise.all(open.map((p) => p.close()));
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
      const manifest = JSON.parse(readFileSync(join(PLUGINS_DIR, rel, "manifest.json"), "utf8")) as Manifest;
      assert.equal(manifest.name, rel.split("/").pop());
      const module = await WebAssembly.compile(readFileSync(join(PLUGINS_DIR, rel, "plugin.wasm")));
      const exports = new Set(WebAssembly.Module.exports(module).filter((e) => e.kind === "function").map((e) => e.name));
      for (const hook of manifest.hooks) assert.ok(exports.has(hook), `missing export ${hook}`);
      for (const c of manifest.commands) assert.ok(exports.has(`command_${c.name}`), `missing export command_${c.name}`);
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

  it("injects the operator's conventions (non-ASCII intact) when set", async () => {
    const p = await load("memory-reinject");
    const text = 'Écrire des tests ✓ — "quoted" 😀\nline two';
    assert.deepEqual(await p.command("conventions", { raw_args: text }), { conventions: text });
    await p.hook("post_compaction", compaction("s2", "s1", "summarize"));
    assert.deepEqual(JSON.parse(await p.hook("pre_llm_call", preLlm("s2"))), { context: text });
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
    const entry = JSON.parse(p.host.kv.get("\0entry:s0b")!);
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
    assert.deepEqual(p.host.globalKeys(), ["entry:late"]);
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

  it("kvsnoop sees only its own keys when namespaces hold", async () => {
    const p = await load("hostile/kvsnoop");
    assert.deepEqual(await p.command("kvsnoop", { raw_args: "other-1 other-2", session_id: "mine" }), { own_ok: true, foreign: [] });
  });

  it("hostile plugins misbehave as advertised (limits are the runtime's job)", async () => {
    await assert.rejects((await load("hostile/trap", [])).hook("pre_llm_call", preLlm("s")), /unreachable/);
    await assert.rejects((await load("hostile/trap", [])).hook("post_compaction", compaction("s", "", "summarize")));
    const bad = await (await load("hostile/badjson", [])).hook("pre_llm_call", preLlm("s"));
    assert.throws(() => JSON.parse(bad));
    const big = await (await load("hostile/bigoutput", [])).hook("pre_llm_call", preLlm("s"));
    assert.equal(big.length, 10 << 20);
    const ungranted = await load("hostile/ungranted", []);
    for (const what of ["kv", "sessions", "http"]) {
      await assert.rejects(ungranted.command("ungranted", { raw_args: what }), /denied/);
    }
    assert.deepEqual(ungranted.host.denied, ["hookbox_kv_set", "hookbox_session_messages", "hookbox_http"]);
    const snoop = await load("hostile/httpsnoop", []);
    await assert.rejects(snoop.command("httpsnoop", { raw_args: "http://169.254.169.254/" }), /denied/);
  });
});
