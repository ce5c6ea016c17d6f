// `npm run bench [-- --quick] [-- --only fanout,delete,fuel,http]` / `deno task bench`: runs the
// suites, prints ONE table (stdout) with the targets checked, writes bench/results/<timestamp>.json.
// Progress goes to stderr. BENCH_QUICK=1 is the same as --quick.
import process from "node:process";
import { parseOptions, progress, type BenchOptions } from "./lib/options.ts";
import { formatTable, runtimeName, writeResults, type Row } from "./lib/report.ts";
import { targetRows } from "./lib/targets.ts";
import { runFanout } from "./suites/fanout.ts";
import { runBulkDelete } from "./suites/bulk-delete.ts";
import { runFuel } from "./suites/fuel.ts";
import { runHttpTurn } from "./suites/http-turn.ts";
import { runListing } from "./suites/listing.ts";
import { runStartup } from "./suites/startup.ts";
import { runSeedDelete } from "./suites/seed-delete.ts";
import { runWorker } from "./suites/worker.ts";
import { runPluginTool } from "./suites/plugin-tool.ts";
import { runRoundTrips } from "./suites/roundtrips.ts";
import { runResponsiveness } from "./suites/responsiveness.ts";

const SUITES: Record<string, (o: BenchOptions) => Promise<Row[]>> = {
  fanout: runFanout,
  delete: runBulkDelete,
  fuel: runFuel,
  http: runHttpTurn,
  listing: runListing,
  startup: runStartup,
  "seed-delete": runSeedDelete,
  worker: runWorker,
  "plugin-tool": runPluginTool,
  roundtrips: runRoundTrips,
  responsiveness: runResponsiveness,
};

function selected(argv: readonly string[]): string[] {
  const i = argv.indexOf("--only");
  if (i < 0) return Object.keys(SUITES);
  const names = (argv[i + 1] ?? "").split(",").filter(Boolean);
  const unknown = names.filter((n) => !(n in SUITES));
  if (names.length === 0 || unknown.length > 0) {
    process.stderr.write(`--only takes a comma list of: ${Object.keys(SUITES).join(", ")}\n`);
    process.exit(2);
  }
  return names;
}

const USAGE = `usage: bench [--quick] [--only ${Object.keys(SUITES).join(",")}]  (BENCH_QUICK=1 = --quick)\n`;

const argv = process.argv.slice(2);
if (argv.includes("--help") || argv.includes("-h")) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const stray = argv.filter((a, i) => a !== "--quick" && a !== "--only" && argv[i - 1] !== "--only");
if (stray.length > 0) {
  process.stderr.write(`unknown argument ${stray.join(" ")}\n${USAGE}`);
  process.exit(2);
}
const opts = parseOptions(argv, process.env);
progress(`${runtimeName()}, ${opts.quick ? "quick" : "full"} run`);
const rows: Row[] = [];
for (const name of selected(argv)) {
  // One failing suite (e.g. a worker that cannot start on an overloaded machine) must not lose the
  // figures of the others: it becomes a FAILED row with its error.
  try {
    rows.push(...(await SUITES[name]!(opts)));
  } catch (err) {
    progress(`suite ${name} failed: ${(err as Error).message}`);
    rows.push({ group: `suite ${name}`, case: "FAILED", met: false, note: (err as Error).message.slice(0, 200) });
  }
}
rows.push(...targetRows(rows));
const file = writeResults(new URL("./results/", import.meta.url).pathname, opts.quick, rows);
process.stdout.write(`hookbox bench: ${runtimeName()}, ${opts.quick ? "quick" : "full"} run\n${formatTable(rows)}\n`);
progress(`results written to ${file}`);
// Plugin instances or client sockets must not keep the process alive.
process.exit(0);
