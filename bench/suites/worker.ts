// Plugins that read or fetch (granted sessions:read or http:) next to the same work done by a
// TypeScript callback: pre_llm_call reads the session's last 20 messages; post_llm_call GETs a local
// HTTP server. The WASM side is the probe fixture through the real runtime, granted only what the
// case needs: with sessions:read it runs in-thread (the read is synchronous, at the database); with
// http: in-thread, suspended while the fetch is awaited: by JSPI where the runtime has it (Deno), by
// a rewindable module elsewhere (Node 20; a worker if that cannot be made). The case names the path
// taken. The floor is an in-process callback doing the same query / fetch, and, as
// the probe does, reading the URL from its plugin KV first (through the same PluginKv and store).
import { Hono } from "hono";
import { callbackSubscriber } from "../../hooks/dispatcher.ts";
import { PluginKv } from "../../host-api/kv.ts";
import type { Core } from "../../runtime/core.ts";
import type { Storage } from "../../runtime/storage/db.ts";
import { serveFetch } from "../../runtime/server.ts";
import { CAN_SUSPEND, type WasmPlugin } from "../../runtime/sandbox/wasm-plugin.ts";
import { assertNoPluginFailures, openBenchCore, type BenchCore } from "../lib/core.ts";
import { INTERLEAVED_ROUNDS, measureInterleaved, type InterleavedCase } from "../lib/measure.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";

async function sessionWithHistory(core: Core): Promise<string> {
  const s = await core.sessions.create({ profile: "bench", platform: "bench" });
  const msgs = Array.from({ length: 24 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `message ${i}: ${"lorem ipsum ".repeat(8)}` }));
  await core.sessions.append(s.id, msgs);
  return s.id;
}

function payloads(sid: string) {
  const common = { session_id: sid, platform: "bench", model: "local", turn_id: "t_bench", user_message: "what is 6*7?" };
  return {
    pre: { ...common, conversation_history: [], is_first_turn: false, user_id: null, parent_session_id: null },
    post: { ...common, response: "42", usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 } },
  };
}

const TS_PROBE = "ts-probe";

function subscribeTs(core: Core): void {
  const kv = new PluginKv(TS_PROBE, core.kv, core.config.plugins.kv_quota);
  core.dispatcher.subscribe(
    callbackSubscriber(TS_PROBE, ["pre_llm_call", "post_llm_call"], async (p) => {
      if ("conversation_history" in p) {
        const rows = await core.storage.db
          .selectFrom("messages")
          .select(["role", "content"])
          .where("session_id", "=", p.session_id)
          .orderBy("seq", "desc")
          .limit(20)
          .execute();
        if (rows.length < 2) throw new Error("ts probe: no messages read");
        JSON.stringify(rows.reverse());
      } else {
        kv.begin();
        const url = kv.get("", "url");
        kv.end(true);
        if (url === undefined) throw new Error("ts probe: no url in KV");
        const res = await fetch(url);
        if (res.status !== 200) throw new Error("ts probe: http call failed");
        await res.text();
      }
    }),
  );
}

/** Stores the URL to fetch in `plugin`'s KV, where the probe (and the floor) read it at each call. */
const storeUrl = (plugin: string, url: string) => async (storage: Storage) => {
  await storage.write((trx) => trx.insertInto("plugin_kv").values({ plugin, session_id: "", key: "url", value: url, updated_at: Date.now() }).execute());
};

export async function runWorker(opts: BenchOptions): Promise<Row[]> {
  const app = new Hono().get("/data", (c) => c.json({ items: [1, 2, 3], note: "a small JSON answer" }));
  const server = await serveFetch(app.fetch, { host: "127.0.0.1", port: 0 });
  const url = `${server.url}/data`;
  let ts: BenchCore | undefined;
  const opened: BenchCore[] = [];
  try {
    ts = await openBenchCore({ beforeStart: storeUrl(TS_PROBE, url) });
    subscribeTs(ts.core);
    const rows: Row[] = [];
    const cases = [
      { hook: "pre_llm_call" as const, what: "sessions:read, 20 messages", grants: ["kv", "sessions:read"], path: "in-thread" },
      { hook: "post_llm_call" as const, what: "http: GET a local server", grants: ["kv", "http:127.0.0.1"] },
    ];
    const tsSid = await sessionWithHistory(ts.core);
    for (const c of cases) {
      const wasm = await openBenchCore({
        fleet: [{ from: "hostile/probe", prefix: "probe", count: 1, grants: c.grants }],
        beforeStart: storeUrl("probe-00", url),
      });
      opened.push(wasm);
      const wasmSid = await sessionWithHistory(wasm.core);
      const emitCase = (bc: BenchCore, sid: string, label: string): InterleavedCase => {
        const p = payloads(sid);
        const payload = c.hook === "pre_llm_call" ? p.pre : p.post;
        return { name: `${c.hook} ${label}`, fn: () => bc.core.dispatcher.emit(c.hook, payload as never) };
      };
      const entries = (wasm.core.plugins as unknown as { entries: Map<string, { sandbox?: WasmPlugin }> }).entries;
      const sandbox = () => entries.get("probe-00")?.sandbox;
      // Without JSPI an http: plugin runs in a worker until its rewindable module is made, in the
      // background after its load (about a second): measured once it is, as a server is after start-up.
      if (c.hook === "post_llm_call" && !CAN_SUSPEND) {
        const warm = emitCase(wasm, wasmSid, "warm-up");
        for (const until = Date.now() + 30_000; sandbox()?.path !== "in-thread, rewinding" && Date.now() < until; ) {
          await warm.fn();
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      progress(`worker path: ${c.what}, TS callback and WASM plugin, ${INTERLEAVED_ROUNDS} interleaved rounds`);
      const [floor, plug] = await measureInterleaved([emitCase(ts, tsSid, "TS callback"), emitCase(wasm, wasmSid, "WASM plugin")], INTERLEAVED_ROUNDS, {
        time: opts.taskMs,
        iterations: opts.minIterations,
      });
      assertNoPluginFailures(ts.core, `${c.hook} TS callback`);
      assertNoPluginFailures(wasm.core, `${c.hook} WASM plugin`);
      // The path its calls took (JSPI where the runtime has it, else a rewindable module, else a worker).
      const path = sandbox()?.path ?? "not built";
      const group = `plugin that reads/fetches (${c.what}), one ${c.hook}`;
      rows.push({ group, case: "TS callback (floor)", plugins: 1, mean_ms: floor.mean, p99_ms: floor.p99, samples: floor.samples });
      rows.push({
        group,
        case: `WASM plugin (${path})`,
        plugins: 1,
        mean_ms: plug.mean,
        p99_ms: plug.p99,
        samples: plug.samples,
        ratio: plug.mean / floor.mean,
        ratio_p99: plug.p99 / floor.p99,
      });
    }
    return rows;
  } finally {
    for (const bc of opened) await bc.close();
    await ts?.close();
    await server.close();
  }
}
