// Hook fan-out: delivers one payload to every subscribed plugin in name order, fails open on any
// plugin failure, and keeps the per-plugin bookkeeping the SPEC promises (stats, time-out cool-off,
// quarantine after repeated failures). WASM plugins and in-process TS callbacks share this interface.
import { SCHEMA_VERSION, type HookFields, type HookName, type HookPayload } from "./catalogue.ts";
import { checkHookResult, readsOutput } from "./results.ts";
import { log } from "../runtime/log.ts";

export const FAILURE_KINDS = ["trap", "fuel", "timeout", "memory", "bad_output", "denied", "unavailable"] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

/** A plugin call that failed; `kind` says which limit or fault stopped it. */
export class PluginCallError extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
  ) {
    super(message);
    this.name = "PluginCallError";
  }
}

/** One hook delivery. The JSON text is built at most once per emit, however many plugins read it. */
export interface Delivery<H extends HookName = HookName> {
  readonly hook: H;
  readonly payload: Readonly<HookPayload<H>>;
  json(): string;
  /** Epoch ms after which the call counts as timed out (the plugin's own wall-clock limit). */
  readonly deadline: number;
}

export interface CallResult {
  /** The plugin's raw output: empty/undefined for nothing, otherwise JSON text. */
  output?: string | undefined;
  /** Fuel the call used, when the runtime meters it. */
  fuel?: number | undefined;
  /**
   * Set when the subscriber already ran readHookOutput on its output before committing the call's
   * effects (a WASM call's KV writes must not land when its output is refused): what it read.
   */
  checked?: { output: HookOutput | undefined } | undefined;
}

export interface HookSubscriber {
  readonly name: string;
  readonly hooks: ReadonlySet<HookName>;
  /** Wall-clock limit for this plugin's calls; the dispatcher's default when absent. */
  readonly timeoutMs?: number | undefined;
  /**
   * True when the subscriber itself stops a call at `delivery.deadline` (fuel-metered WASM checks the
   * clock at every fuel refill; worker plugins use the SDK's time-out): the dispatcher then spares the
   * per-call timer it otherwise races against the call, a measurable cost on every fan-out.
   */
  readonly enforcesDeadline?: boolean | undefined;
  call(delivery: Delivery): Promise<CallResult> | CallResult;
}

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

export interface HookFailure {
  plugin: string;
  kind: FailureKind;
  message: string;
}

export interface HookReport {
  hook: HookName;
  delivered: string[];
  failed: HookFailure[];
  skipped: Array<{ plugin: string; why: "cooloff" | "quarantined" }>;
  /** pre_llm_call only: non-empty context strings in plugin (name) order. */
  injected: Array<{ plugin: string; context: string }>;
  /** Hooks whose return is used: each plugin's parsed, non-empty result in plugin (name) order. */
  results: Array<{ plugin: string; value: unknown }>;
}

/** One finished hook call, as a per-call observer (metrics) sees it. */
export interface CallEvent {
  plugin: string;
  hook: HookName;
  ms: number;
  fuel: number;
  /** Set when the call failed. */
  failure?: FailureKind | undefined;
}

export interface DispatcherOptions {
  /** plugins.hook_callback_timeout in ms (SPEC default 30 s). */
  timeoutMs?: number;
  /** How long a timed-out plugin's hook is skipped (default 60 s). */
  cooloffMs?: number;
  /** Consecutive failed calls that quarantine a plugin (default 5). */
  quarantineAfter?: number;
  /** Largest accepted plugin output in bytes (default 64 KiB). */
  maxOutputBytes?: number;
  now?: () => number;
  onQuarantine?: (plugin: string, reason: string) => void;
}

const LATENCY_WINDOW = 1024;

class Bookkeeping {
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

export class HookDispatcher {
  private readonly subscribers = new Map<string, HookSubscriber>();
  private readonly books = new Map<string, Bookkeeping>();
  /** Per hook, its subscribers in name order; rebuilt on (un)subscribe so emit does no sorting. */
  private byHook = new Map<HookName, HookSubscriber[]>();
  private readonly timeoutMs: number;
  private readonly cooloffMs: number;
  private readonly quarantineAfter: number;
  private readonly maxOutputBytes: number;
  private readonly now: () => number;
  private onQuarantine: ((plugin: string, reason: string) => void) | undefined;
  private readonly callObservers = new Set<(e: CallEvent) => void>();

  constructor(opts: DispatcherOptions = {}) {
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.cooloffMs = opts.cooloffMs ?? 60_000;
    this.quarantineAfter = opts.quarantineAfter ?? 5;
    this.maxOutputBytes = opts.maxOutputBytes ?? 64 * 1024;
    this.now = opts.now ?? Date.now;
    this.onQuarantine = opts.onQuarantine;
  }

  subscribe(sub: HookSubscriber): void {
    if (this.subscribers.has(sub.name)) throw new Error(`plugin "${sub.name}" is already subscribed`);
    this.subscribers.set(sub.name, sub);
    if (!this.books.has(sub.name)) this.books.set(sub.name, new Bookkeeping());
    this.reindex();
  }

  unsubscribe(name: string): void {
    if (this.subscribers.delete(name)) this.reindex();
  }

  isSubscribed(name: string): boolean {
    return this.subscribers.has(name);
  }

  /** Who hears of a new quarantine (the plugin runtime persists it); set after construction. */
  setQuarantineListener(listener: ((plugin: string, reason: string) => void) | undefined): void {
    this.onQuarantine = listener;
  }

  /** Tells `fn` of every finished hook call (success or failure); returns the unsubscribe. */
  onCall(fn: (e: CallEvent) => void): () => void {
    this.callObservers.add(fn);
    return () => void this.callObservers.delete(fn);
  }

  /** Marks a plugin quarantined (e.g. restored from storage at start-up). */
  quarantine(name: string, reason: string): void {
    this.book(name).quarantined = reason;
  }

  /** Lifts a quarantine and clears failure streaks and cool-offs (operator re-enable). */
  release(name: string): void {
    const b = this.book(name);
    b.quarantined = null;
    b.consecutiveFailures = 0;
    b.cooloffUntil.clear();
    b.hookStreak.clear();
    b.hookQuarantine.clear();
  }

  stats(name: string): PluginStats | undefined {
    return this.books.get(name)?.snapshot();
  }

  /** Adds fuel consumed outside a hook call (e.g. a slash command run by the same plugin). */
  recordExternalCall(name: string, ms: number, error?: PluginCallError, fuel?: number): void {
    const b = this.book(name);
    b.calls++;
    b.recordLatency(ms);
    if (fuel) b.fuelUsed += fuel;
    if (error) this.fail(name, b, error);
    else {
      b.ok++;
      b.consecutiveFailures = 0;
    }
  }

  subscribersOf(hook: HookName): readonly string[] {
    return (this.byHook.get(hook) ?? []).map((s) => s.name);
  }

  /**
   * Delivers `hook` to every subscriber. Never throws for a plugin's sake: failures are counted,
   * logged and reported; the caller's operation goes on.
   */
  async emit<H extends HookName>(hook: H, fields: HookFields<H>): Promise<HookReport> {
    const report: HookReport = { hook, delivered: [], failed: [], skipped: [], injected: [], results: [] };
    const subs = this.byHook.get(hook);
    if (!subs || subs.length === 0) return report;
    const payload = Object.freeze({ hook, schema_version: SCHEMA_VERSION, ...fields }) as unknown as HookPayload<H>;
    let json: string | undefined;
    const jsonOnce = () => (json ??= JSON.stringify(payload));
    for (const sub of subs) {
      const b = this.book(sub.name);
      if (b.quarantined !== null || b.hookQuarantine.has(hook)) {
        report.skipped.push({ plugin: sub.name, why: "quarantined" });
        continue;
      }
      const until = b.cooloffUntil.get(hook);
      const start = this.now();
      if (until !== undefined) {
        if (start < until) {
          b.skippedCooloff++;
          report.skipped.push({ plugin: sub.name, why: "cooloff" });
          continue;
        }
        b.cooloffUntil.delete(hook);
      }
      const timeoutMs = sub.timeoutMs ?? this.timeoutMs;
      const delivery: Delivery<H> = { hook, payload, json: jsonOnce, deadline: start + timeoutMs };
      const t0 = performance.now();
      b.calls++;
      try {
        const pending = sub.call(delivery as Delivery);
        const result = await (sub.enforcesDeadline ? pending : this.withDeadline(pending, timeoutMs, sub.name));
        const ms = performance.now() - t0;
        b.recordLatency(ms);
        if (result.fuel) b.fuelUsed += result.fuel;
        const out = result.checked ? result.checked.output : readHookOutput(hook, result.output, this.maxOutputBytes);
        this.observed(sub.name, hook, ms, result.fuel ?? 0);
        b.ok++;
        b.consecutiveFailures = 0;
        b.hookStreak.delete(hook);
        report.delivered.push(sub.name);
        if (out?.context) report.injected.push({ plugin: sub.name, context: out.context });
        if (out) report.results.push({ plugin: sub.name, value: out.value });
      } catch (err) {
        const ms = performance.now() - t0;
        b.recordLatency(ms);
        const e = toCallError(err);
        this.observed(sub.name, hook, ms, 0, e.kind);
        if (e.kind === "timeout") b.cooloffUntil.set(hook, this.now() + this.cooloffMs);
        this.fail(sub.name, b, e, hook);
        report.failed.push({ plugin: sub.name, kind: e.kind, message: e.message });
      }
    }
    return report;
  }

  private observed(plugin: string, hook: HookName, ms: number, fuel: number, failure?: FailureKind): void {
    if (this.callObservers.size === 0) return;
    for (const fn of this.callObservers) fn({ plugin, hook, ms, fuel, failure });
  }

  private fail(name: string, b: Bookkeeping, e: PluginCallError, hook?: HookName): void {
    b.failures[e.kind]++;
    b.consecutiveFailures++;
    b.lastError = `${e.kind}: ${e.message}`;
    b.failingHook = hook ?? null;
    if (hook !== undefined) {
      const streak = (b.hookStreak.get(hook) ?? 0) + 1;
      b.hookStreak.set(hook, streak);
      // A hook that keeps failing while the plugin's other hooks succeed is quarantined alone, so
      // it neither silences them nor fails silently forever (it shows in plugins list).
      if (streak >= this.quarantineAfter && !b.hookQuarantine.has(hook)) {
        const reason = `hook ${hook} quarantined after ${streak} consecutive failures; last: ${b.lastError}`;
        b.hookQuarantine.set(hook, reason);
        log("error", "plugin hook quarantined", { plugin: name, hook, reason });
      }
    }
    log("warn", "plugin call failed", { plugin: name, kind: e.kind, error: e.message });
    if (b.quarantined === null && b.consecutiveFailures >= this.quarantineAfter) {
      b.quarantined = `quarantined after ${b.consecutiveFailures} consecutive failures; last: ${b.lastError}`;
      log("error", "plugin quarantined", { plugin: name, reason: b.quarantined });
      this.onQuarantine?.(name, b.quarantined);
    }
  }

  private withDeadline(result: Promise<CallResult> | CallResult, ms: number, name: string): Promise<CallResult> | CallResult {
    if (!(result instanceof Promise)) return result;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new PluginCallError("timeout", `${name} ran past ${ms} ms`)), ms);
    });
    return Promise.race([result, expired]).finally(() => clearTimeout(timer));
  }

  private book(name: string): Bookkeeping {
    let b = this.books.get(name);
    if (!b) this.books.set(name, (b = new Bookkeeping()));
    return b;
  }

  private reindex(): void {
    const sorted = [...this.subscribers.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const next = new Map<HookName, HookSubscriber[]>();
    for (const s of sorted) for (const h of s.hooks) (next.get(h) ?? next.set(h, []).get(h)!).push(s);
    this.byHook = next;
  }
}

/** What the core took from one plugin's output: the parsed result, and pre_llm_call's context. */
export interface HookOutput {
  value: unknown;
  context: string | undefined;
}

/**
 * Reads a plugin's output for `hook`. An observer's output is ignored, whatever it is. For a hook
 * whose return is used: empty is "nothing"; otherwise it must be JSON of that hook's result shape
 * (hooks/results.ts), else bad_output. A JSON null is "nothing" too.
 */
export function readHookOutput(hook: HookName, output: string | undefined, maxOutputBytes = Number.MAX_SAFE_INTEGER): HookOutput | undefined {
  if (!readsOutput(hook) || output === undefined || output.length === 0) return undefined;
  // UTF-8 length is at most 3 bytes per UTF-16 unit; count exactly only near the limit.
  if (output.length * 3 > maxOutputBytes && Buffer.byteLength(output) > maxOutputBytes) {
    throw new PluginCallError("bad_output", `output of ${Buffer.byteLength(output)} bytes exceeds ${maxOutputBytes}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(output);
  } catch {
    throw new PluginCallError("bad_output", `output is not JSON: ${JSON.stringify(output.slice(0, 80))}`);
  }
  const res = checkHookResult(hook, parsed);
  if (!res.ok) throw new PluginCallError("bad_output", res.problem);
  if (res.value === null) return undefined;
  if (hook !== "pre_llm_call") return { value: res.value, context: undefined };
  const ctx = typeof res.value === "string" ? res.value : (res.value as { context: string }).context;
  return ctx.trim().length > 0 ? { value: res.value, context: ctx } : undefined;
}


function toCallError(err: unknown): PluginCallError {
  if (err instanceof PluginCallError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new PluginCallError("trap", message);
}

/** An in-process TS subscriber: the unsandboxed floor, and how tests observe hooks. */
export function callbackSubscriber(
  name: string,
  hooks: Iterable<HookName>,
  fn: (payload: Readonly<HookPayload<HookName>>) => unknown,
): HookSubscriber {
  return {
    name,
    hooks: new Set(hooks),
    call(d) {
      const out = fn(d.payload);
      if (out instanceof Promise) return out.then(wrapOutput);
      return wrapOutput(out);
    },
  };
}

function wrapOutput(out: unknown): CallResult {
  return { output: out === undefined ? undefined : JSON.stringify(out) };
}
