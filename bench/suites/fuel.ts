// Fuel metering cost: the compute plugin (a hashing loop) called through the same sandbox class,
// once from the instrumented module (fuel + memory cap, as loaded in production) and once from the
// plain module, same input. The ratio is what metering costs a compute-bound plugin.
import { readFileSync } from "node:fs";
import { HOST_FUNCTION_NAMES } from "../../host-api/functions.ts";
import { compileInstrumented } from "../../runtime/sandbox/module-cache.ts";
import type { HostBinding } from "../../host-api/binding.ts";
import { WasmPlugin, type SandboxLimits } from "../../runtime/sandbox/wasm-plugin.ts";
import { measure } from "../lib/measure.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";

const ROUNDS = 2_000_000;
const LIMITS: SandboxLimits = { fuel: 500_000_000, memoryPages: 16, timeoutMs: 10_000, maxOutputBytes: 4096 };

/** compute calls no host function; every import still has to resolve. */
const host: HostBinding = {
  functions: Object.fromEntries(
    HOST_FUNCTION_NAMES.map((n) => [
      n,
      () => {
        throw new Error(`${n} is not available in the fuel benchmark`);
      },
    ]),
  ),
  begin() {},
  end() {},
};

export async function runFuel(opts: BenchOptions): Promise<Row[]> {
  const bytes = new Uint8Array(readFileSync(new URL("../../plugins-wasm/hostile/compute/plugin.wasm", import.meta.url)));
  const modules = {
    unmetered: new WebAssembly.Module(bytes),
    metered: await compileInstrumented(bytes, { memoryPages: LIMITS.memoryPages }),
  };
  const input = JSON.stringify({ hook: "pre_llm_call", schema_version: 1, iterations: ROUNDS });
  const timings: Record<string, { mean: number; p99: number; samples: number; fuel: number }> = {};
  for (const [variant, module] of Object.entries(modules)) {
    progress(`fuel: compute ${ROUNDS} rounds, ${variant}`);
    const plugin = new WasmPlugin({ name: `compute-${variant}`, module, limits: LIMITS, host, inWorker: false });
    await plugin.warm();
    let fuel = 0;
    const t = await measure(
      `compute ${variant}`,
      async () => {
        fuel = (await plugin.call("pre_llm_call", input, Date.now() + LIMITS.timeoutMs)).fuel;
      },
      { time: opts.taskMs, iterations: opts.minIterations },
    );
    await plugin.close();
    timings[variant] = { ...t, fuel };
  }
  const off = timings.unmetered!;
  const on = timings.metered!;
  const group = `fuel metering (compute, ${ROUNDS.toLocaleString("en")} rounds)`;
  return [
    { group, case: "unmetered module", mean_ms: off.mean, p99_ms: off.p99, samples: off.samples },
    {
      group,
      case: "metered (instrumented)",
      mean_ms: on.mean,
      p99_ms: on.p99,
      samples: on.samples,
      ratio: on.mean / off.mean,
      ratio_p99: on.p99 / off.p99,
      note: `${on.fuel.toLocaleString("en")} fuel/call`,
    },
  ];
}
