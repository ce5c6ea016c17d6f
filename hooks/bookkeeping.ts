// Per-plugin bookkeeping of the dispatcher: call and failure counts, latency window, time-out
// cool-offs, and quarantine of a plugin or of one of its hooks.
import type { HookName } from "./catalogue.ts";
import { FAILURE_KINDS, type FailureKind } from "./failures.ts";

export interface PluginStats {
  calls: number;
  ok: number;
  failures: Record<FailureKind, number>;
  skipped_cooloff: number;
  fuel_used: number;
  latency_ms: { p50: number; p99: number; samples: number };
  consecutive_failures: number;
  quarantined: string | null;
  last_error: string | null;
  /** The hook whose call failed last (the one that led to a quarantine, if any). */
  failing_hook: string | null;
  /**
   * Hooks quarantined on their own (their consecutive failures reached quarantine_after while the
   * plugin's other hooks kept succeeding): only that hook is skipped; reason per hook.
   */
  quarantined_hooks: Record<string, string>;
}

const LATENCY_WINDOW = 1024;

export class Bookkeeping {
  readonly failures = Object.fromEntries(FAILURE_KINDS.map((k) => [k, 0])) as Record<FailureKind, number>;
  calls = 0;
  ok = 0;
  skippedCooloff = 0;
  fuelUsed = 0;
  consecutiveFailures = 0;
  quarantined: string | null = null;
  lastError: string | null = null;
  failingHook: string | null = null;
  readonly cooloffUntil = new Map<HookName, number>();
  /** Per tool of the plugin: until when it is not offered nor run, after it timed out. */
  readonly toolCooloffUntil = new Map<string, number>();
  /** Per hook: consecutive failures of that hook alone, and its own quarantine. */
  readonly hookStreak = new Map<HookName, number>();
  readonly hookQuarantine = new Map<HookName, string>();
  private readonly latencies = new Float64Array(LATENCY_WINDOW);
  private samples = 0;

  recordLatency(ms: number): void {
    this.latencies[this.samples % LATENCY_WINDOW] = ms;
    this.samples++;
  }

  snapshot(): PluginStats {
    const n = Math.min(this.samples, LATENCY_WINDOW);
    const sorted = this.latencies.slice(0, n).sort();
    const pick = (q: number) => (n === 0 ? 0 : round3(sorted[Math.min(n - 1, Math.floor(q * n))]!));
    return {
      calls: this.calls,
      ok: this.ok,
      failures: { ...this.failures },
      skipped_cooloff: this.skippedCooloff,
      fuel_used: this.fuelUsed,
      latency_ms: { p50: pick(0.5), p99: pick(0.99), samples: this.samples },
      consecutive_failures: this.consecutiveFailures,
      quarantined: this.quarantined,
      quarantined_hooks: Object.fromEntries(this.hookQuarantine),
      last_error: this.lastError,
      failing_hook: this.failingHook,
    };
  }
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
