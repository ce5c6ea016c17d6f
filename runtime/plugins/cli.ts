// `hookbox plugins list [--json] | enable NAME | disable NAME`: the operator's view of the plugin
// runtime (status, reason, grants, stats) and the persisted enable/disable override. A change takes
// effect in this process at once and in a running server at its next start.
import type { Core } from "../core.ts";
import { AppError } from "../errors.ts";
import { PluginNotFoundError, type PluginInfo } from "./host.ts";

export const PLUGINS_USAGE = "  hookbox plugins list [--json] | enable NAME | disable NAME";

type Out = { out(line: string): void };

export function pluginsArgs(argv: string[], usage: (message: string) => Error): (core: Core, io: Out) => Promise<void> {
  const [sub, ...rest] = argv;
  if (sub === "list") {
    const json = rest.length === 1 && rest[0] === "--json";
    if (rest.length > (json ? 1 : 0)) throw usage(`plugins list takes only --json`);
    return async (core, io) => {
      const plugins = core.plugins.list();
      if (json) io.out(JSON.stringify({ plugins }, null, 2));
      else for (const p of plugins) io.out(describe(p));
    };
  }
  if (sub === "enable" || sub === "disable") {
    if (rest.length !== 1) throw usage(`plugins ${sub} takes one plugin name`);
    const name = rest[0]!;
    return async (core, io) => {
      try {
        const info = sub === "enable" ? await core.plugins.enable(name) : await core.plugins.disable(name);
        io.out(describe(info));
      } catch (err) {
        if (err instanceof PluginNotFoundError) throw new AppError(404, "not_found", err.message);
        throw err;
      }
    };
  }
  throw usage(sub === undefined ? "plugins needs list, enable or disable" : `unknown plugins command ${sub}`);
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
