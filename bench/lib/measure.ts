// Thin layer over tinybench: every figure in the report comes from here, as milliseconds.
import { Bench } from "tinybench";

export interface Timing {
  /** Mean latency per iteration, ms. */
  mean: number;
  /** 99th percentile latency per iteration, ms. */
  p99: number;
  /** Iterations measured. */
  samples: number;
  /** Wall-clock time of bench.run(), warm-up included when there is one, ms. */
  wall: number;
}

export interface MeasureOptions {
  /** Time budget, ms (0: stop after `iterations`). */
  time: number;
  /** Minimum iterations (with `concurrency`, the exact count). */
  iterations?: number;
  /** Untimed work before every iteration (e.g. re-seeding the rows a delete removes). */
  beforeEach?: () => Promise<void> | void;
  /** Warm-up iterations (JIT, instance build, caches); 0 for none. */
  warmupIterations?: number;
  /** Iterations in flight at once (e.g. HTTP clients). */
  concurrency?: number;
}

/** Runs `fn` under tinybench and returns its latency statistics. */
export async function measure(name: string, fn: () => Promise<unknown> | unknown, opts: MeasureOptions): Promise<Timing> {
  const warmupIterations = opts.warmupIterations ?? 16;
  const concurrency = opts.concurrency ?? 1;
  const bench = new Bench({
    name,
    time: opts.time,
    iterations: opts.iterations ?? 64,
    warmup: warmupIterations > 0,
    warmupIterations,
    warmupTime: 0,
    throws: true,
    ...(concurrency > 1 ? { concurrency: "task" as const, threshold: concurrency } : {}),
  });
  const hooks = opts.beforeEach ? { beforeEach: async () => void (await opts.beforeEach!()) } : {};
  bench.add(name, fn, hooks);
  const t0 = performance.now();
  await bench.run();
  const wall = performance.now() - t0;
  const result = bench.tasks[0]!.result;
  if (result.state !== "completed") throw new Error(`bench task ${name} ended ${result.state}`);
  return { mean: result.latency.mean, p99: result.latency.p99, samples: result.latency.samplesCount, wall };
}
