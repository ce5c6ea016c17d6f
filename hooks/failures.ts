// How a plugin call can fail: the kinds the stats, metrics and API report, and the error that carries one.
export const FAILURE_KINDS = ["trap", "fuel", "timeout", "memory", "bad_output", "denied", "unavailable", "quota", "conflict"] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

/**
 * A plugin call that failed; `kind` says which limit or fault stopped it. `unavailable` is the host's
 * side (the plugin is not running, its database cannot answer) and never leads to a quarantine.
 */
export class PluginCallError extends Error {
  /** Fuel the call burned before it failed, when the sandbox knows it (counted in the plugin's stats). */
  fuel?: number;

  constructor(
    readonly kind: FailureKind,
    message: string,
  ) {
    super(message);
    this.name = "PluginCallError";
  }
}

/** One plugin's failure within a hook fan-out. */
export interface HookFailure {
  plugin: string;
  kind: FailureKind;
  message: string;
}

/** Any thrown value as a PluginCallError (an unexpected error counts as a trap). */
export function toCallError(err: unknown): PluginCallError {
  if (err instanceof PluginCallError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new PluginCallError("trap", message);
}

/** How a `quota` failure of the plugin's stored KV (keys or bytes, plugins.kv_quota) begins: not a per-call limit. */
export const STORED_QUOTA_TEXT = "kv quota of ";

/** A failure that never brings a quarantine nearer: the host's (`unavailable`), or the plugin's stored KV quota reached. */
export const sparesQuarantine = (e: PluginCallError): boolean => e.kind === "unavailable" || (e.kind === "quota" && e.message.startsWith(STORED_QUOTA_TEXT));
