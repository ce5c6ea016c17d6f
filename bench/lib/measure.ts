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

export interface InterleavedCase {
  name: string;
  fn: () => Promise<unknown> | unknown;
  beforeEach?: () => Promise<void> | void;
  /**
   * Untimed set-up and tear-down around each of the case's rounds (e.g. a core and its plugin
   * instances), so a case runs with only its own instances alive, as it would alone.
   */
  open?: () => Promise<void>;
  close?: () => Promise<void>;
}

/** Interleaved rounds per comparison in the fan-out, worker-path and plugin-tool suites. */
export const INTERLEAVED_ROUNDS = 4;

/** The middle value (the upper one of an even count). */
export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Cases that are compared with each other, measured in `rounds` interleaved rounds (the order
 * rotates each round, each round gets 1/rounds of the time budget) and reported as the median
 * round's mean and p99 per case: the shared machine's drift and bursts hit every case alike,
 * instead of whichever ran during them.
 */
export async function measureInterleaved<const T extends readonly InterleavedCase[]>(
  cases: T,
  rounds: number,
  opts: MeasureOptions,
): Promise<{ -readonly [K in keyof T]: Timing }> {
  const runs: Timing[][] = cases.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < cases.length; k++) {
      const i = (k + round) % cases.length;
      const c = cases[i]!;
      await c.open?.();
      try {
        runs[i]!.push(
          await measure(c.name, c.fn, {
            ...opts,
            time: opts.time / rounds,
            iterations: Math.max(1, Math.ceil((opts.iterations ?? 64) / rounds)),
            // Warm-up once per case, unless it is opened afresh for each round.
            warmupIterations: round === 0 || c.open ? opts.warmupIterations : 0,
            ...(c.beforeEach ? { beforeEach: c.beforeEach } : {}),
          }),
        );
      } finally {
        await c.close?.();
      }
    }
  }
  return runs.map(medianRound) as { -readonly [K in keyof T]: Timing };
}

/** Rounds of one case as one figure: the median round's mean and p99, samples and wall time summed. */
export function medianRound(rounds: readonly Timing[]): Timing {
  return {
    mean: median(rounds.map((t) => t.mean)),
    p99: median(rounds.map((t) => t.p99)),
    samples: rounds.reduce((n, t) => n + t.samples, 0),
    wall: rounds.reduce((n, t) => n + t.wall, 0),
  };
}
