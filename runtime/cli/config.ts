// `hookbox config`: the effective configuration (file + environment + defaults), secrets masked,
// then the checks serve makes against plugins.dir: exit 1 with serve's own error when it would refuse.
import type { Command } from "commander";
import { ENV_SETTINGS, maskSecrets } from "../config.ts";
import { checkAgainstPluginDir } from "./config-checks.ts";
import type { CliContext } from "./context.ts";

/** Variables that are not settings of the configuration, but of the process (an outside probe missed them here). */
const PROCESS_VARIABLES = [
  ["HOOKBOX_CONFIG", "the configuration file, default ./hookbox.config.json when present"],
  ["HOOKBOX_LOG", "log level: debug, info, warn, error, silent; default info"],
] as const;

export function registerConfig(program: Command, ctx: CliContext): void {
  program
    .command("config")
    .description("print the effective configuration (file, environment and defaults; secrets masked); exit 1 when serve would refuse it")
    .option("--env", "list every setting's environment variable instead (and the two that are not settings)")
    .action((o: { env?: boolean }) => {
      if (o.env) {
        for (const [name, what] of PROCESS_VARIABLES) ctx.io.out(`${name}\t(${what})`);
        for (const s of ENV_SETTINGS) ctx.io.out(`${s.env}\t${s.path.join(".")}`);
      } else {
        const config = ctx.config();
        // Checked first (its warnings are printed with the rest), refused after printing.
        let refusal: unknown;
        try {
          checkAgainstPluginDir(config);
        } catch (err) {
          refusal = err;
        }
        ctx.io.out(JSON.stringify(maskSecrets(config), null, 2));
        if (refusal) throw refusal;
      }
    });
}
