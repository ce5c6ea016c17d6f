// `hookbox plugins list [--json] | enable NAME | disable NAME | reset [NAME...]`: the operator's view
// of the plugin runtime (status, reason, grants, stats) and the persisted enable/disable overrides.
// A change takes effect in this process at once and in a running server at its next start.
// `hookbox plugins new | build`: the plugin author's loop (scaffold.ts).
import type { Command } from "commander";
import type { CliContext } from "../cli/context.ts";
import { AppError } from "../errors.ts";
import { suggest } from "../util/suggest.ts";
import { PluginNotFoundError, type PluginInfo } from "./host.ts";
import { buildPlugins, scaffoldPlugin, SCAFFOLD_LANGS, type ScaffoldLang } from "./scaffold.ts";

/** Registers the `plugins` subcommands on `plugins` (the `hookbox plugins` command). */
export function registerPluginCommands(plugins: Command, ctx: CliContext): void {
  const { io } = ctx;
  plugins
    .command("list")
    .description("every plugin in plugins.dir with status, reason, grants and stats")
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean }) => {
      const list = (await ctx.core()).plugins.list();
      if (o.json) io.out(JSON.stringify({ plugins: list }, null, 2));
      else for (const p of list) io.out(describe(p));
    });
  for (const action of ["enable", "disable"] as const) {
    plugins
      .command(action)
      .description(`${action} a plugin (persisted; overrides plugins.enabled/disabled until "plugins reset")`)
      .argument("<name>")
      .action(async (name: string) => {
        const core = await ctx.core();
        try {
          io.out(describe(action === "enable" ? await core.plugins.enable(name) : await core.plugins.disable(name)));
        } catch (err) {
          if (err instanceof PluginNotFoundError) {
            throw new AppError(404, "not_found", `${err.message}${suggest(name, core.plugins.list().map((p) => p.name))}`);
          }
          throw err;
        }
      });
  }
  plugins
    .command("reset")
    .description("clear the enable/disable overrides (of NAMEs, or of all plugins): the config decides again")
    .argument("[names...]")
    .action(async (names: string[]) => {
      const db = (await ctx.core()).storage.db;
      let q = db.updateTable("plugin_state").set({ enabled: null }).where("enabled", "is not", null);
      if (names.length) q = q.where("name", "in", names);
      const cleared = (await q.returning("name").execute()).map((r) => r.name).sort();
      for (const name of cleared) io.out(`override cleared: ${name}`);
      io.out(`${cleared.length} override(s) cleared; a running server applies this at its next start`);
    });
  registerAuthorCommands(plugins, ctx);
}

function registerAuthorCommands(plugins: Command, ctx: CliContext): void {
  const { io } = ctx;
  plugins
    .command("new")
    .description("scaffold a plugin folder (manifest + source of the language's example plugin) and build it")
    .argument("<name>")
    .option("--lang <lang>", `source language: ${Object.keys(SCAFFOLD_LANGS).join(", ")}`, "as")
    .option("--dir <dir>", "folder to create it in (default: plugins.dir)")
    .option("--no-build", "only write the files")
    .action((name: string, o: { lang: string; dir?: string; build: boolean }) => {
      if (!Object.hasOwn(SCAFFOLD_LANGS, o.lang)) throw ctx.usage(`--lang must be one of ${Object.keys(SCAFFOLD_LANGS).join(", ")}`);
      const made = scaffoldPlugin(o.dir ?? ctx.config().plugins.dir, name, o.lang as ScaffoldLang);
      io.out(`created ${made.path} (${made.files.join(", ")}); command /${made.command}`);
      if (o.build) build(ctx, [made.path]);
      io.out(`next: add "${name}" to plugins.enabled (and its capabilities to plugins.grants), then try it with`);
      io.out(`  hookbox plugins call ${name} command ${made.command} hi`);
    });
  plugins
    .command("build")
    .description("build plugin folders (paths) or plugins of plugins-wasm (names); all of plugins.dir when none given")
    .argument("[plugins...]")
    .action((names: string[]) => build(ctx, names.length ? names : [ctx.config().plugins.dir]));
}

function build(ctx: CliContext, paths: string[]): void {
  const r = buildPlugins(paths);
  for (const line of r.output.split("\n")) if (line) ctx.io.out(line);
  if (!r.ok) throw new AppError(422, "build_failed", "build failed (see above); the plugin keeps no plugin.wasm until it builds");
}

function describe(p: PluginInfo): string {
  const s = p.stats;
  const failed = s ? Object.entries(s.failures).filter(([, n]) => n > 0).map(([k, n]) => `${k}=${n}`) : [];
  const parts = [
    p.name.padEnd(20),
    p.status.padEnd(11),
    `v${p.version ?? "?"}`,
    `granted=[${p.capabilities.granted.join(",")}]`,
    s ? `calls=${s.calls} ok=${s.ok}${failed.length ? ` failed(${failed.join(",")})` : ""} fuel=${s.fuel_used} p50=${s.latency_ms.p50}ms p99=${s.latency_ms.p99}ms` : "calls=0",
  ];
  if (p.reason) parts.push(`reason: ${p.reason}`);
  return parts.join("  ");
}
