// `hookbox config`: the effective configuration (file + environment + defaults), secrets masked.
import type { Command } from "commander";
import { ENV_SETTINGS, maskSecrets } from "../config.ts";
import type { CliContext } from "./context.ts";

export function registerConfig(program: Command, ctx: CliContext): void {
  program
    .command("config")
    .description("print the effective configuration (file, environment and defaults; secrets masked)")
    .option("--env", "list every setting's environment variable instead")
    .action((o: { env?: boolean }) => {
      if (o.env) for (const s of ENV_SETTINGS) ctx.io.out(`${s.env}\t${s.path.join(".")}`);
      else ctx.io.out(JSON.stringify(maskSecrets(ctx.config()), null, 2));
    });
}
