// Entry point of the hookbox command line (`npm run hookbox -- ...`, `deno task hookbox ...`,
// `node --import tsx runtime/cli.ts ...`). `hookbox --help` and `hookbox <command> --help` list
// everything; the commands live in runtime/cli/ (and runtime/plugins/cli.ts).
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { guardInterrupts } from "./cli/interrupt.ts";
import { runCli } from "./cli/program.ts";

export { buildCore, runCli, type CliIO, type CliOptions } from "./cli/program.ts";

const isMain =
  (import.meta as { main?: boolean }).main ?? (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url));
if (isMain) {
  const argv = process.argv.slice(2);
  const err = (l: string) => console.error(l);
  // Every command but serve finishes what it started on a signal (runtime/cli/interrupt.ts).
  const guard = argv[0] === "serve" ? undefined : guardInterrupts(err);
  // A reader gone (| head -c1: EPIPE) is no error of the command's.
  for (const s of [process.stdout, process.stderr]) s.on("error", () => {});
  const code = await runCli(argv, { out: (l) => console.log(l), err });
  // A pipe takes stdout asynchronously on Node: exiting at once cut a long answer (--json) at 64 KiB.
  await Promise.all([process.stdout, process.stderr].map((s) => new Promise<void>((done) => s.write("", () => done()))));
  process.exit(guard?.signal && code === 0 ? 130 : code);
}
