// What `plugins list`, GET /v1/plugins and the runtime itself say about a plugin: whether it is
// wanted (config, operator override) and its status with the reason.
import { Bookkeeping } from "../../hooks/bookkeeping.ts";
import type { HookDispatcher } from "../../hooks/dispatcher.ts";
import type { Config } from "../config.ts";
import type { PluginEntry } from "./entry.ts";
import type { PluginInfo, PluginStatus } from "./host.ts";

/** plugins.disabled always wins; then the operator's override; then plugins.enabled. */
export function isWanted(e: PluginEntry, config: Config): boolean {
  const { enabled, disabled } = config.plugins;
  if (disabled.includes(e.name)) return false;
  return e.override ?? enabled.includes(e.name);
}

export function pluginInfo(e: PluginEntry, config: Config, dispatcher: HookDispatcher): PluginInfo {
  const m = e.manifest;
  // A running plugin that has not been called yet (one with no hooks) has zero stats, not none.
  const stats = dispatcher.stats(e.name) ?? (e.sandbox ? new Bookkeeping().snapshot() : null);
  let status: PluginStatus = "active";
  let reason: string | null = null;
  if (e.error !== null) [status, reason] = ["failed", e.error];
  else if (config.plugins.disabled.includes(e.name)) [status, reason] = ["disabled", "disabled by config (plugins.disabled)"];
  else if (e.override === false) [status, reason] = ["disabled", "disabled by operator"];
  else if (!isWanted(e, config)) [status, reason] = ["disabled", "not listed in plugins.enabled"];
  else if (stats?.quarantined) [status, reason] = ["quarantined", `${stats.quarantined}${liftQuarantine(e.name)}`];
  return {
    name: e.name,
    version: m?.version ?? null,
    description: m?.description ?? null,
    hooks: m ? [...m.hooks] : [],
    unknown_hooks: m ? [...m.unknown_hooks] : [],
    unknown_fields: m ? [...m.unknown_fields] : [],
    tools: m ? m.tools.map((t) => ({ name: t.name, description: t.description })) : [],
    system_prompt: m?.system_prompt !== undefined,
    commands: m ? m.commands.map((c) => ({ name: c.name, description: c.description, sensitive: c.sensitive })) : [],
    capabilities: { requested: m ? [...m.capabilities] : [], granted: [...e.grants.list], ungranted: e.grants.ungranted },
    limits: e.limits ? { fuel: e.limits.fuel, memory_pages: e.limits.memoryPages, max_output_bytes: e.limits.maxOutputBytes, timeout_seconds: e.limits.timeoutMs / 1000 } : null,
    status,
    reason,
    stats,
  };
}

/** How an operator lifts a plugin's quarantine (it stays across restarts until then). */
export const liftQuarantine = (name: string) => ` (an operator lifts it: the CLI's plugins enable ${name}, or POST /v1/plugins/${name}/enable)`;
