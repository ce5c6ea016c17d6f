// `hookbox plugins list [--json] | enable NAME | disable NAME | reset [NAME...]`: the operator's view
// of the plugin runtime (status, reason, grants, stats) and the persisted enable/disable overrides.
// A change takes effect in this process at once and in a running server at its next start.
import type { Command } from "commander";
import type { CliContext } from "../cli/context.ts";
import { AppError } from "../errors.ts";
import { PluginNotFoundError, type PluginInfo } from "./host.ts";

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
          if (err instanceof PluginNotFoundError) throw new AppError(404, "not_found", err.message);
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
