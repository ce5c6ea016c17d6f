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
