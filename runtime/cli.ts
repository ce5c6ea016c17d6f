// Entry point of the hookbox command line (`npm run hookbox -- ...`, `deno task hookbox ...`,
// `node --import tsx runtime/cli.ts ...`). `hookbox --help` and `hookbox <command> --help` list
// everything; the commands live in runtime/cli/ (and runtime/plugins/cli.ts).
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { runCli } from "./cli/program.ts";

export { buildCore, runCli, type CliIO, type CliOptions } from "./cli/program.ts";

const isMain =
  (import.meta as { main?: boolean }).main ?? (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url));
if (isMain) {
  const code = await runCli(process.argv.slice(2), { out: (l) => console.log(l), err: (l) => console.error(l) });
  process.exit(code);
}
