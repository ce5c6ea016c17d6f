// What the core and its HTTP/CLI surfaces need from the plugin runtime. The WASM runtime
// (runtime/plugins/manager.ts) implements it; the core works with no plugins at all.
import type { HookName } from "../../hooks/catalogue.ts";
import type { PluginStats } from "../../hooks/bookkeeping.ts";
import type { PluginLogEntry } from "./logs.ts";

export const PLUGIN_STATUSES = ["active", "disabled", "quarantined", "failed"] as const;
export type PluginStatus = (typeof PLUGIN_STATUSES)[number];

export interface PluginInfo {
  name: string;
  version: string | null;
  description: string | null;
  hooks: HookName[];
  /** Hooks the manifest names that this host does not know (not subscribed; a warning at load). */
  unknown_hooks: string[];
  /** Top-level manifest keys this host does not know (ignored; a warning at load), with a suggestion for a typo. */
  unknown_fields: string[];
  /** Tools the plugin declares (offered to the model while it is active). */
  tools: Array<{ name: string; description: string }>;
  /** Whether the manifest declares a durable system-prompt section. */
  system_prompt: boolean;
  commands: Array<{ name: string; description: string; sensitive: boolean }>;
  /** `ungranted`: requested, and granted nothing of by the operator (plugins.grants): its calls that need them fail as denied. */
  capabilities: { requested: string[]; granted: string[]; ungranted: string[] };
  /** The limits its calls run under (the operator's over the manifest's, capped, over the defaults); null when its manifest failed. */
  limits: { fuel: number; memory_pages: number; max_output_bytes: number; timeout_seconds: number } | null;
  status: PluginStatus;
  /** Why the plugin is not active (load error, quarantine reason, "disabled by config", ...). */
  reason: string | null;
  stats: PluginStats | null;
}

export class PluginNotFoundError extends Error {
  override name = "PluginNotFoundError";
}

export interface PluginHost {
  list(): PluginInfo[];
  get(name: string): PluginInfo | undefined;
  /**
   * Whether the plugin's sandbox is up right now. An active plugin is not running for a moment while
   * it loads, reloads or is enabled (between its old instance's stop and its new one's start).
   */
  running(name: string): boolean;
  /** Resolves once a change of the plugin under way (a reload, an enable, a disable) has ended; at once when none is. */
  settled(name: string): Promise<void>;
  /** Operator enable: also lifts a quarantine. Throws PluginNotFoundError for an unknown name. */
  enable(name: string): Promise<PluginInfo>;
  disable(name: string): Promise<PluginInfo>;
  /** Durable system-prompt sections for a session (its id, then its compaction predecessors). */
  promptSections(sessionIds: readonly string[]): Array<{ plugin: string; text: string }>;
  /** The plugin's log ring (entries after `since`, at most `limit`); undefined for an unknown name. */
  logs(name: string, since?: number, limit?: number): PluginLogEntry[] | undefined;
  close(): Promise<void>;
}

/** The host used when no plugin runtime is wired in: nothing loaded, nothing to toggle. */
export const noPlugins: PluginHost = {
  list: () => [],
  get: () => undefined,
  running: () => false,
  settled: async () => {},
  enable: async (name) => {
    throw new PluginNotFoundError(`no plugin named ${name}`);
  },
  disable: async (name) => {
    throw new PluginNotFoundError(`no plugin named ${name}`);
  },
  promptSections: () => [],
  logs: () => undefined,
  close: async () => {},
};
