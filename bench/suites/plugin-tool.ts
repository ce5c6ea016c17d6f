// A turn whose model calls a tool: the sandboxed plugin tool (text-stats' text_stats, through the
// real plugin runtime: schema check, sandbox call under fuel and time limits, pre/post_tool_call)
// vs the same tool written in TypeScript and registered in the same tool registry (the floor).
// Each iteration is one whole turn on a fresh session (created untimed), so both pay the same
// storage and hook work; the ratio says what running the tool sandboxed costs a turn.
import type { Core } from "../../runtime/core.ts";
import { assertNoPluginFailures, openBenchCore } from "../lib/core.ts";
import { INTERLEAVED_ROUNDS, measureInterleaved, type InterleavedCase } from "../lib/measure.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";

const TEXT = "The quick brown fox jumps over the lazy dog.\n".repeat(40);

/** text-stats' tool in TypeScript: the same counts (words, lines, code points). */
function textStats(text: string): string {
  let words = 0;
  let lines = text.length > 0 ? 1 : 0;
  let chars = 0;
  let inWord = false;
  for (const ch of text) {
    chars++;
    if (ch === "\n") lines++;
    const space = ch === " " || ch === "\n" || ch === "\t" || ch === "\r";
    if (!space && !inWord) words++;
    inWord = !space;
  }
  return JSON.stringify({ words, lines, chars });
}

export async function runPluginTool(opts: BenchOptions): Promise<Row[]> {
  const bench = await openBenchCore({ fleet: [{ from: "text-stats", prefix: "text-stats", count: 1 }] });
  const { core } = bench;
  try {
    core.tools.register({ spec: { ...core.tools.get("text_stats")!.spec, name: "text_stats_ts" }, run: (args) => textStats(String(args.text)) });
    progress(`plugin-tool: turns calling text_stats_ts and text_stats, ${INTERLEAVED_ROUNDS} interleaved rounds`);
    const turnCase = (tool: string): InterleavedCase => {
      let sid = "";
      const message = `use tool ${tool} ${JSON.stringify({ text: TEXT })}`;
      return {
        name: `turn ${tool}`,
        fn: () => turnChecked(core, sid, message),
        beforeEach: async () => void (sid = (await core.sessions.create({ profile: "bench", platform: "bench" })).id),
      };
    };
    const [ts, wasm] = await measureInterleaved([turnCase("text_stats_ts"), turnCase("text_stats")], INTERLEAVED_ROUNDS, {
      time: opts.taskMs,
      iterations: opts.minIterations,
    });
    assertNoPluginFailures(core, "plugin-tool");
    const group = "turn calling a tool (text_stats, 1.8 KB text)";
    return [
      { group, case: "same tool in TypeScript", mean_ms: ts.mean, p99_ms: ts.p99, samples: ts.samples },
      { group, case: "sandboxed plugin tool (WASM)", plugins: 1, mean_ms: wasm.mean, p99_ms: wasm.p99, samples: wasm.samples, ratio: wasm.mean / ts.mean, ratio_p99: wasm.p99 / ts.p99 },
    ];
  } finally {
    await bench.close();
  }
}

/** One turn; refuses a run where the tool did not really run (a figure of less work). */
async function turnChecked(core: Core, sid: string, message: string): Promise<void> {
  const r = await core.turns.run(sid, message);
  if (r.type !== "reply" || r.tool_calls[0]?.status !== "ok" || !r.tool_calls[0].result.startsWith('{"words":360')) {
    throw new Error(`plugin-tool: the tool did not run as expected: ${JSON.stringify(r).slice(0, 300)}`);
  }
}
