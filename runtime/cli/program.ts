// The hookbox command line, built with commander (well kept, no dependencies, runs on Node and on
// Deno through npm): it gives every subcommand its own --help, refuses unknown options and extra
// arguments, and suggests the nearest command or option for a typo. Each area registers its own
// subcommands (sessions, plugins, serve, config); runCli maps outcomes to exit codes:
// 0 done, 1 failed (e.g. not found), 2 usage error.
import { INVOKED_AS } from "./invoked-as.ts";
import { Command, CommanderError } from "commander";
import { ConfigError, loadConfig, type Config } from "../config.ts";
import { createCore, type Core, type PluginHostFactory } from "../core.ts";
import { AppError } from "../errors.ts";
import { CommandError } from "../commands/registry.ts";
import { PluginNotFoundError } from "../plugins/host.ts";
import { log } from "../log.ts";
import { printable } from "../util/printable.ts";
import { VERSION } from "../version.ts";
import { startPluginHost } from "../plugins/manager.ts";
import { registerPluginCommands } from "../plugins/cli.ts";
import { checkAgainstPluginDir } from "./config-checks.ts";
import { registerConfig } from "./config.ts";
import { UsageError, type CliContext, type CliIO } from "./context.ts";
import { registerServe } from "./serve.ts";
import { registerSessionCommands } from "./sessions.ts";

export type { CliIO } from "./context.ts";

/** The plugin runtime started with the core (serve and every CLI command, so CLI deletes reach plugins too). */
const pluginHost: PluginHostFactory = startPluginHost;

/** The core the CLI and `serve` run on: the config's plugin and command names are checked against plugins.dir first. */
export function buildCore(config: Config): Promise<Core> {
  checkAgainstPluginDir(config);
  return createCore(config, { pluginHost });
}

export interface CliOptions {
  config?: Config;
  /** Run against this already-open core (tests, embedding); it is left open. */
  core?: Core;
}

const fullName = (cmd: Command): string => (cmd.parent ? `${fullName(cmd.parent)} ${cmd.name()}` : INVOKED_AS);
const hint = (cmd: Command) => `hint: run "${fullName(cmd)} --help" for usage`;

function buildProgram(ctx: CliContext): Command {
  const program = new Command("hookbox")
    .description("hookbox: an agent core with WebAssembly plugins")
    .version(VERSION)
    .exitOverride()
    .configureOutput({ writeOut: (s) => ctx.io.out(s.trimEnd()), writeErr: (s) => ctx.io.err(s.trimEnd()) });
  registerServe(program, ctx);
  registerSessionCommands(program, ctx);
  registerPluginCommands(program.command("plugins").description("list, enable, disable and reset plugins; scaffold, build and call them; read their logs"), ctx);
  registerConfig(program, ctx);
  // Commander's own errors ("error: unknown option ...") become one line plus a hint naming the command.
  const withHints = (cmd: Command) => {
    cmd.exitOverride().configureOutput({
      writeOut: (s) => ctx.io.out(s.trimEnd()),
      writeErr: (s) => ctx.io.err(s.trimEnd()),
      outputError: (s, write) => write(`${s.trim().replace(/^error: /, "hookbox: ").replace(/\s*\n\s*/g, " ")}\n${hint(cmd)}\n`),
    });
    cmd.commands.forEach(withHints);
  };
  withHints(program);
  return program;
}

/** Runs one CLI command; returns the exit code. `serve` resolves when the server has stopped. */
export async function runCli(argv: string[], io: CliIO, opts: CliOptions = {}): Promise<number> {
  let config = opts.config ?? opts.core?.config;
  let core: Promise<Core> | undefined = opts.core && Promise.resolve(opts.core);
  let opened: Promise<Core> | undefined;
  const ctx: CliContext = {
    io,
    config: () => (config ??= loadConfig()),
    core: (override) => (core ??= opened = buildCore(override ?? ctx.config())),
    usage: (message) => new UsageError(message),
  };
  let running: Command | undefined;
  const program = buildProgram(ctx).hook("preAction", (_self, action) => {
    running = action;
  });
  try {
    await program.parseAsync(argv, { from: "user" });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.code === "commander.helpDisplayed" || err.code === "commander.version" ? 0 : 2;
    if (err instanceof UsageError) {
      io.err(`hookbox: ${printable(err.message, true)}`);
      if (running) io.err(hint(running));
      return 2;
    }
    // What the API answers 400 (a bad cursor, an unknown hook) is bad input to the command: a usage error.
    if (err instanceof AppError && err.status === 400) {
      io.err(`hookbox: ${printable(err.message, true)}`);
      if (running) io.err(hint(running));
      return 2;
    }
    // What the API answers as a command's or a plugin's error (an unknown /command, a plugin not
    // found) is an answer, not a crash of the CLI: no stack to look for.
    if (err instanceof AppError || err instanceof ConfigError || err instanceof CommandError || err instanceof PluginNotFoundError) {
      io.err(`hookbox: ${printable(err.message, true)}`);
      return 1;
    }
    log("debug", "command failed", { error: (err as Error).stack ?? String(err) });
    io.err(`hookbox: ${printable((err as Error).message ?? String(err), true)} (HOOKBOX_LOG=debug shows the stack)`);
    return 1;
  } finally {
    if (opened) await opened.then((c) => c.close()).catch(() => {});
  }
}
