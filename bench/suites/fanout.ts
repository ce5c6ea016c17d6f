// post_compaction fan-out: one emit delivered to N WASM plugins (memory-reinject copies, through the
// real manager, host API and sandbox) vs N in-process TS callbacks doing the same work (the
// unsandboxed floor). Two workloads: "observe" (the plugin reads the payload and returns: kind
// prune_tool_results) and "kv write" (a rotating summarize: each plugin moves a session-scoped mark
// from the old session to the new one, and the floor does it through the same PluginKv, so both pay
// the same persistence).
import { callbackSubscriber } from "../../hooks/dispatcher.ts";
import type { HookFields } from "../../hooks/catalogue.ts";
import { PluginKv } from "../../host-api/kv.ts";
import type { Core } from "../../runtime/core.ts";
import type { PluginManager } from "../../runtime/plugins/manager.ts";
import { assertNoPluginFailures, openBenchCore, type BenchCore } from "../lib/core.ts";
import { INTERLEAVED_ROUNDS, measureInterleaved, type InterleavedCase, type Timing } from "../lib/measure.ts";
import { openRawFleet, type RawFleet } from "../lib/raw-extism.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";

export const FANOUT_SIZES = [1, 10, 50] as const;
type Workload = "observe" | "kv write";
const WORKLOADS: ReadonlyArray<{ name: Workload; kind: "prune_tool_results" | "summarize" }> = [
  { name: "observe", kind: "prune_tool_results" },
  { name: "kv write", kind: "summarize" },
];

const SESSIONS = 64;
const MODULE = new URL("../../plugins-wasm/memory-reinject/plugin.wasm", import.meta.url).pathname;

/** post_compaction events cycling over real sessions (plugin KV is only kept for live sessions). */
async function eventSource(core: Core, kind: "prune_tool_results" | "summarize") {
  const ids: string[] = [];
  for (let i = 0; i < SESSIONS; i++) ids.push((await core.sessions.create({ profile: "bench", platform: "bench" })).id);
  let n = 0;
  // summarize events rotate (session n continues n-1): each plugin sets the new session's mark and
  // drops the old one's, so every event really changes KV (writes that change nothing are skipped).
  return (): HookFields<"post_compaction"> => ({
    session_id: ids[++n % SESSIONS]!,
    old_session_id: kind === "summarize" ? ids[(n - 1) % SESSIONS]! : "",
    kind,
    reason: "between_turns",
    before_tokens: 9_000,
    after_tokens: 2_100,
    messages_removed: 14,
  });
}

/** memory-reinject's post_compaction, in TypeScript, on the same KV store the sandbox uses. */
function subscribeFloor(core: Core, count: number): void {
  for (let i = 0; i < count; i++) {
    const name = `ts-${String(i).padStart(2, "0")}`;
    const kv = new PluginKv(name, core.kv, core.config.plugins.kv_quota);
    core.dispatcher.subscribe(
      callbackSubscriber(name, ["post_compaction"], (p) => {
        const e = p as HookFields<"post_compaction">;
        if (e.kind !== "summarize" && e.kind !== "micro_summarize") return;
        if (e.session_id.length === 0) return;
        kv.set(e.session_id, "pending", "1");
        if (e.old_session_id.length > 0 && e.old_session_id !== e.session_id) kv.delete(e.old_session_id, "pending");
        kv.end(true);
      }),
    );
  }
}

/**
 * One event until it is fully handled: the fan-out, then (kv write) until every plugin's KV write is
 * in libSQL. Without the wait, synchronous TS callbacks would let writes pile up untimed. Each round
 * opens the core afresh (`open`), so only this case's plugin instances are alive while it runs.
 */
function fanoutCase(name: string, kind: "prune_tool_results" | "summarize", openCore: () => Promise<BenchCore>, settle: (bc: BenchCore) => Promise<unknown>): InterleavedCase {
  let bc: BenchCore | undefined;
  let next: (() => HookFields<"post_compaction">) | undefined;
  return {
    name,
    async open() {
      bc = await openCore();
      next = await eventSource(bc.core, kind);
    },
    async close() {
      try {
        assertNoPluginFailures(bc!.core, name);
      } finally {
        await bc!.close();
      }
    },
    fn: async () => {
      await bc!.core.dispatcher.emit("post_compaction", next!());
      await settle(bc!);
    },
  };
}

/** The same module and event through Extism alone, in-thread: the floor for hookbox's per-call cost. */
function rawExtismCase(name: string, n: number): InterleavedCase {
  const payload = { session_id: "s_raw", old_session_id: "", kind: "prune_tool_results", reason: "between_turns", before_tokens: 9_000, after_tokens: 2_100, messages_removed: 14 };
  let fleet: RawFleet | undefined;
  return {
    name,
    async open() {
      fleet = await openRawFleet(MODULE, n);
    },
    close: () => fleet!.close(),
    fn: () => fleet!.emit("post_compaction", payload),
  };
}

export async function runFanout(opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  for (const w of WORKLOADS) {
    for (const n of FANOUT_SIZES) {
      progress(`fan-out ${w.name}: ${n} TS callbacks, WASM plugins${w.name === "observe" ? ", raw Extism calls" : ""}, ${INTERLEAVED_ROUNDS} interleaved rounds`);
      const cases = [
        fanoutCase(`${n} TS callbacks`, w.kind, async () => {
          const bc = await openBenchCore();
          subscribeFloor(bc.core, n);
          return bc;
        }, (bc) => bc.core.kv.flush()),
        fanoutCase(`${n} WASM plugins`, w.kind, () => openBenchCore({ fleet: [{ from: "memory-reinject", prefix: "mr", count: n }] }), (bc) =>
          (bc.core.plugins as PluginManager).flush(),
        ),
        ...(w.name === "observe" ? [rawExtismCase(`${n} raw Extism calls`, n)] : []),
      ];
      const timings = await measureInterleaved(cases, INTERLEAVED_ROUNDS, { time: opts.taskMs, iterations: opts.minIterations });
      const [floor, wasm, raw] = timings as [Timing, Timing, Timing | undefined];

      const group = `post_compaction fan-out (${w.name})`;
      rows.push({ group, case: `${n} TS callbacks (floor)`, plugins: n, mean_ms: floor.mean, p99_ms: floor.p99, samples: floor.samples });
      const wasmRow: Row = {
        group,
        case: `${n} WASM plugins`,
        plugins: n,
        mean_ms: wasm.mean,
        p99_ms: wasm.p99,
        samples: wasm.samples,
        ratio: wasm.mean / floor.mean,
        ratio_p99: wasm.p99 / floor.p99,
      };
      rows.push(wasmRow);
      if (raw) {
        rows.push({ group, case: `${n} raw Extism calls (outside floor)`, plugins: n, mean_ms: raw.mean, p99_ms: raw.p99, samples: raw.samples, note: "same module, no hookbox" });
        wasmRow.note = `vs raw Extism: ${(wasm.mean / raw.mean).toFixed(2)}x (p99 ${(wasm.p99 / raw.p99).toFixed(2)}x)`;
      }
    }
  }
  return rows;
}
