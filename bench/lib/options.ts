// Run options shared by every suite: quick mode (CI smoke, well under a minute) or the full run,
// and progress lines on stderr so stdout stays the one results table.
import process from "node:process";

export interface BenchOptions {
  quick: boolean;
  /** tinybench time budget per latency task, ms. */
  taskMs: number;
  /** Minimum iterations per latency task (slow tasks stop here once over budget). */
  minIterations: number;
  /** Iterations per bulk-delete size (each re-seeds the database untimed). */
  deleteRounds: number;
  /** Bulk-delete sizes (sessions removed per operation, cascade included). */
  deleteSizes: number[];
  /** HTTP suite: requests per target per round, connections in flight, interleaved rounds. */
  httpRequests: number;
  httpClients: number;
  httpRounds: number;
}

export function parseOptions(argv: readonly string[], env: Record<string, string | undefined>): BenchOptions {
  const quick = argv.includes("--quick") || env.BENCH_QUICK === "1";
  return quick
    ? { quick, taskMs: 250, minIterations: 16, deleteRounds: 2, deleteSizes: [100, 1_000, 10_000], httpRequests: 120, httpClients: 4, httpRounds: 2 }
    : { quick, taskMs: 2_000, minIterations: 64, deleteRounds: 6, deleteSizes: [100, 1_000, 10_000], httpRequests: 400, httpClients: 8, httpRounds: 5 };
}

const started = performance.now();

/** One progress line on stderr, stamped with seconds since start. */
export function progress(msg: string): void {
  process.stderr.write(`[bench ${((performance.now() - started) / 1000).toFixed(1).padStart(5)}s] ${msg}\n`);
}
