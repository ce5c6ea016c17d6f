// Effective limits of one plugin: the operator's config over the manifest over the defaults. What a
// manifest asks for is capped (a plugin never grants itself resources); the operator is not.
import type { Config, PluginLimits } from "../config.ts";
import type { SandboxLimits } from "../sandbox/wasm-plugin.ts";
import { ownValue } from "../util/own.ts";

export const DEFAULT_LIMITS = { fuel: 100_000_000, memory_pages: 256, max_output_bytes: 64 * 1024 } as const;
const MANIFEST_CEILING = { fuel: 1_000_000_000, memory_pages: 1024, max_output_bytes: 1024 * 1024 } as const;

export function effectiveLimits(name: string, manifest: PluginLimits, config: Config): SandboxLimits {
  const op = ownValue(config.plugins.limits, name) ?? {};
  const hookTimeout = config.plugins.hook_callback_timeout;
  const pick = (k: keyof typeof DEFAULT_LIMITS) => op[k] ?? Math.min(manifest[k] ?? DEFAULT_LIMITS[k], MANIFEST_CEILING[k]);
  const timeoutSeconds = op.timeout_seconds ?? Math.min(manifest.timeout_seconds ?? hookTimeout, hookTimeout);
  return {
    fuel: pick("fuel"),
    memoryPages: pick("memory_pages"),
    maxOutputBytes: pick("max_output_bytes"),
    timeoutMs: Math.round(timeoutSeconds * 1000),
  };
}

/**
 * What the manifest asks for above its ceiling and does not get (the operator's plugins.limits not
 * setting it), one sentence each: said in the plugin's log at load, as a capped limit was silent (an
 * outside operator probe).
 */
export function cappedLimits(name: string, manifest: PluginLimits, config: Config): string[] {
  const op = ownValue(config.plugins.limits, name) ?? {};
  const notes: string[] = [];
  for (const k of Object.keys(MANIFEST_CEILING) as Array<keyof typeof MANIFEST_CEILING>) {
    const asked = manifest[k];
    if (op[k] === undefined && asked !== undefined && asked > MANIFEST_CEILING[k]) {
      notes.push(`manifest limits.${k} ${asked} is above its ceiling: ${MANIFEST_CEILING[k]} applies (the operator's plugins.limits may set more)`);
    }
  }
  const hookTimeout = config.plugins.hook_callback_timeout;
  if (op.timeout_seconds === undefined && manifest.timeout_seconds !== undefined && manifest.timeout_seconds > hookTimeout) {
    notes.push(`manifest limits.timeout_seconds ${manifest.timeout_seconds} is above plugins.hook_callback_timeout: ${hookTimeout} applies (the operator's plugins.limits may set more)`);
  }
  return notes;
}
