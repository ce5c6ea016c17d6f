// Whether the server answers while a plugin spins (issue 9): the p99 of a cheap concurrent request
// (GET /healthz over real HTTP) while copies of the hostile `loop` plugin are called back to back
// and each burns everything it is allowed. Three cases on one server each:
// - idle: nobody spins (the floor);
// - in-thread: each call burns its whole fuel budget (400 M units, ~40 ms here: inside the 50 ms
//   slice, so it stays on the server's thread; back-to-back calls yield every 10 ms of plugin work);
// - worker: unlimited fuel, 1 s deadline: the first call outgrows the slice and moves to a worker,
//   where every later call runs to its deadline and its worker is terminated and replaced.
import type { HookFields } from "../../hooks/catalogue.ts";
import type { ConfigInput } from "../../runtime/config.ts";
import { startServer } from "../../runtime/server.ts";
import { openBenchCore, type BenchCore } from "../lib/core.ts";
import { measure } from "../lib/measure.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";

const RESPONSIVENESS_GROUP = "GET /healthz while a plugin spins";

/** Copies of the loop plugin: one event keeps the thread busy with one after another. */
const SPINNERS = 4;

/** Failures are the point here: never quarantine the spinner or cool it off. */
const TOLERANT: ConfigInput = { plugins: { quarantine_after: 1_000_000, cooloff_seconds: 0 } };

const SPIN_EVENT: HookFields<"post_compaction"> = {
  session_id: "s_spin",
  old_session_id: "",
  kind: "prune_tool_results",
  reason: "between_turns",
  before_tokens: 9_000,
  after_tokens: 2_100,
  messages_removed: 14,
};

const CASES = [
  { case: "idle (floor)", limits: undefined },
  { case: "in-thread: burns 400 M fuel per call", limits: { fuel: 400_000_000, timeout_seconds: 5 } },
  { case: "worker: spins to its 1 s deadline per call", limits: { fuel: 2 ** 40, timeout_seconds: 1 } },
] as const;

async function measureCase(opts: BenchOptions, c: (typeof CASES)[number]): Promise<{ mean: number; p99: number; samples: number; calls: number }> {
  const bc: BenchCore = await openBenchCore({
    config: TOLERANT,
    ...(c.limits ? { fleet: [{ from: "hostile/loop", prefix: "loop", count: SPINNERS, limits: c.limits }] } : {}),
  });
  const server = await startServer(bc.core, { host: "127.0.0.1", port: 0 });
  let spinning = c.limits !== undefined;
  let events = 0;
  // The spinner: one post_compaction after another, to every copy, each a call it never finishes.
  const spinner = (async () => {
    while (spinning) {
      await bc.core.dispatcher.emit("post_compaction", SPIN_EVENT);
      events++;
    }
  })();
  try {
    // Let the worker case reach its steady state (the first call moves it to a worker).
    if (c.limits) await new Promise((r) => setTimeout(r, 300));
    const url = `${server.url}/healthz`;
    const t = await measure(`GET /healthz, ${c.case}`, async () => {
      const res = await fetch(url);
      if (res.status !== 200) throw new Error(`/healthz answered ${res.status}`);
      await res.arrayBuffer();
    }, { time: Math.max(opts.taskMs, 1_500), iterations: opts.minIterations, warmupIterations: 4 });
    return { mean: t.mean, p99: t.p99, samples: t.samples, calls: events * SPINNERS };
  } finally {
    spinning = false;
    await spinner;
    await server.close(0);
    await bc.close();
  }
}

export async function runResponsiveness(opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  let floor: { mean: number; p99: number } | undefined;
  for (const c of CASES) {
    progress(`responsiveness: ${c.case}`);
    const t = await measureCase(opts, c);
    floor ??= t;
    rows.push({
      group: RESPONSIVENESS_GROUP,
      case: c.case,
      mean_ms: t.mean,
      p99_ms: t.p99,
      samples: t.samples,
      ...(c.limits ? { ratio: t.mean / floor.mean, ratio_p99: t.p99 / floor.p99, note: `${t.calls} plugin calls finished meanwhile` } : {}),
    });
  }
  return rows;
}
