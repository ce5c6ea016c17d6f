// Hook fan-out: delivers one payload to every subscribed plugin in name order, fails open on any
// plugin failure, and keeps the per-plugin bookkeeping the SPEC promises (stats, time-out cool-off,
// quarantine after repeated failures). WASM plugins and in-process TS callbacks share this interface.
import { SCHEMA_VERSION, type HookFields, type HookName, type HookPayload } from "./catalogue.ts";
import { Bookkeeping, type PluginStats } from "./bookkeeping.ts";
import { PluginCallError, sparesQuarantine, toCallError, type FailureKind, type HookFailure } from "./failures.ts";
import { silentLogger, type HookLogger } from "./logger.ts";
import { readHookOutput, readsOutput, type HookOutput, type OutputLimits } from "./results.ts";

export type { PluginStats, HookOutput };

/** One hook delivery. The JSON text is built at most once per emit, however many plugins read it. */
export interface Delivery<H extends HookName = HookName> {
  readonly hook: H;
  readonly payload: Readonly<HookPayload<H>>;
  json(): string;
  /** Epoch ms after which the call counts as timed out (the plugin's own wall-clock limit). */
  readonly deadline: number;
  /**
   * The clock at the call's start, as the dispatcher read it: epoch ms (Date.now's clock, with a
   * fraction) and performance.now() ms. A sandbox takes them instead of reading the clock again.
   */
  readonly startedAt: number;
  readonly startedMono: number;
  /** readHookOutput for this hook under the dispatcher's output limits (throws bad_output). */
  readonly readOutput: OutputReader;
}

export interface CallResult {
  /** The plugin's raw output: empty/undefined for nothing, otherwise JSON text. */
  output?: string | undefined;
  /** Fuel the call used, when the runtime meters it. */
  fuel?: number | undefined;
  /**
   * performance.now() when a call that answered synchronously was done (output read, nothing left
   * to commit): the dispatcher takes it as the next call's start instead of reading the clock.
   */
  endedMono?: number | undefined;
  /**
   * True when the subscriber already ran delivery.readOutput on its output before committing the
   * call's effects (a WASM call's KV writes must not land when its output is refused); what it read
   * is `accepted`.
   */
  checked?: boolean | undefined;
  accepted?: HookOutput | undefined;
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

/** A hook's output check (see outputReader); `ignoresOutput` for an observer, which takes any output. */
export type OutputReader = ((output: string | undefined) => HookOutput | undefined) & { readonly ignoresOutput: boolean };

export interface DispatcherOptions {
  /** plugins.hook_callback_timeout in ms (SPEC default 30 s). */
  timeoutMs?: number;
  /** How long a timed-out plugin's hook is skipped (default 60 s). */
  cooloffMs?: number;
  /** Consecutive failed calls that quarantine a plugin (default 5). */
  quarantineAfter?: number;
  /** Largest accepted plugin output in bytes (default 64 KiB). */
  maxOutputBytes?: number;
  /** Most characters of context one call may inject (default 8,000); more fails as `bad_output`. */
  maxInjectedChars?: number;
  now?: () => number;
  onQuarantine?: (plugin: string, reason: string) => void;
  /** Where failures and quarantines are logged (the runtime's log); silent when absent. */
  log?: HookLogger;
}

export class HookDispatcher {
  private readonly subscribers = new Map<string, HookSubscriber>();
  private readonly books = new Map<string, Bookkeeping>();
  /**
   * Per hook, its subscribers in name order with their bookkeeping (a plugin's stays the same object
   * for the dispatcher's life); rebuilt on (un)subscribe so emit does no sorting and no lookups.
   */
  private byHook = new Map<HookName, Array<{ readonly sub: HookSubscriber; readonly book: Bookkeeping }>>();
  private readonly timeoutMs: number;
  private readonly cooloffMs: number;
  private readonly quarantineAfter: number;
  private readonly outputLimits: OutputLimits;
  private readonly now: () => number;
  private onQuarantine: ((plugin: string, reason: string) => void) | undefined;
  private readonly log: HookLogger;
  private readonly callObservers = new Set<(e: CallEvent) => void>();

  constructor(opts: DispatcherOptions = {}) {
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.cooloffMs = opts.cooloffMs ?? 60_000;
    this.quarantineAfter = opts.quarantineAfter ?? 5;
    this.outputLimits = { maxOutputBytes: opts.maxOutputBytes ?? 64 * 1024, maxInjectedChars: opts.maxInjectedChars ?? 8_000 };
    this.now = opts.now ?? Date.now;
    this.onQuarantine = opts.onQuarantine;
    this.log = opts.log ?? silentLogger;
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
    b.toolCooloffUntil.clear();
    b.hookStreak.clear();
    b.hookQuarantine.clear();
  }

  stats(name: string): PluginStats | undefined {
    return this.books.get(name)?.snapshot();
  }

  /** Why `name` is quarantined, or null (cheap: stats() builds the whole snapshot, percentiles too). */
  quarantineOf(name: string): string | null {
    return this.books.get(name)?.quarantined ?? null;
  }

  /**
   * Counts a call made outside a hook (a slash command or a tool of the plugin) in its stats. Such a
   * call's input is its caller's (a user, the model) and its failure is answered to that caller: it
   * neither brings a quarantine nearer nor clears the hooks' failure streak (an outside probe
   * quarantined a tool guard for everyone with five over-long /guard arguments, and every blocked
   * tool ran again).
   */
  recordExternalCall(name: string, ms: number, error?: PluginCallError, fuel?: number): void {
    const b = this.book(name);
    b.calls++;
    b.recordLatency(ms);
    if (fuel) b.fuelUsed += fuel;
    if (error) this.record(name, b, error);
    else b.ok++;
  }

  /**
   * A plugin tool that timed out is neither offered to the model nor run for the cool-off, as a hook
   * that times out is skipped: a plugin could steer the model into its own stalling tool every turn
   * (an outside probe: each turn waited out the time limit, the plugin never cooled off). Not a step
   * towards quarantine: a tool's arguments are its caller's.
   */
  coolOffTool(name: string, tool: string): void {
    this.book(name).toolCooloffUntil.set(tool, this.now() + this.cooloffMs);
  }

  /** Until when `tool` of plugin `name` cools off (epoch ms), or undefined. */
  toolCoolingOff(name: string, tool: string): number | undefined {
    const b = this.books.get(name);
    const until = b && b.toolCooloffUntil.size > 0 ? b.toolCooloffUntil.get(tool) : undefined;
    if (until === undefined || until > this.now()) return until;
    b!.toolCooloffUntil.delete(tool);
    return undefined;
  }

  subscribersOf(hook: HookName): readonly string[] {
    return (this.byHook.get(hook) ?? []).map((s) => s.sub.name);
  }

  /** Whether an emit of `hook` now would call anyone: a subscriber not quarantined (as a plugin or for that hook) nor cooling off. */
  wouldCall(hook: HookName): boolean {
    const now = this.now();
    return (this.byHook.get(hook) ?? []).some(({ book: b }) => b.quarantined === null && !b.hookQuarantine.has(hook) && !((b.cooloffUntil.get(hook) ?? -Infinity) > now));
  }

  /**
   * Delivers `hook` to every subscriber. Never throws for a plugin's sake: failures are counted,
   * logged and reported; the caller's operation goes on.
   */
  async emit<H extends HookName>(hook: H, fields: HookFields<H>): Promise<HookReport> {
    const report: HookReport = { hook, delivered: [], failed: [], skipped: [], injected: [], results: [] };
    const subs = this.byHook.get(hook);
    if (!subs || subs.length === 0) return report;
    const payload = new PayloadOf<H>(hook, fields);
    const readOutput = this.outputReader(hook);
    // At most one clock read per call: a call's end is the next call's start (the bookkeeping
    // between the two is a few hundred ns), where two reads per call were measurable on a
    // 10-plugin fan-out; a sandbox's synchronous call reports its end (endedMono) and is not read
    // again. The wall clock is read once, and followed by that one: the real one for deadlines
    // (sandboxes check them against it), the dispatcher's `now` for cool-offs.
    let t = performance.now();
    const wall = Date.now() - t;
    const policyWall = this.now === Date.now ? wall : this.now() - t;
    for (const { sub, book: b } of subs) {
      if (b.quarantined !== null || (b.hookQuarantine.size > 0 && b.hookQuarantine.has(hook))) {
        report.skipped.push({ plugin: sub.name, why: "quarantined" });
        continue;
      }
      const until = b.cooloffUntil.size > 0 ? b.cooloffUntil.get(hook) : undefined;
      const start = wall + t;
      if (until !== undefined) {
        if (policyWall + t < until) {
          b.skippedCooloff++;
          report.skipped.push({ plugin: sub.name, why: "cooloff" });
          continue;
        }
        b.cooloffUntil.delete(hook);
      }
      const timeoutMs = sub.timeoutMs ?? this.timeoutMs;
      const delivery = new HookDelivery(hook, payload, start + timeoutMs, readOutput, start, t);
      const t0 = t;
      b.calls++;
      try {
        const pending = sub.call(delivery as Delivery);
        // A call that answered synchronously is not awaited: a fan-out to in-thread plugins then
        // runs its calls back to back, with no trip through the microtask queue per plugin.
        let result: CallResult;
        if (pending instanceof Promise) {
          result = await (sub.enforcesDeadline ? pending : this.withDeadline(pending, timeoutMs, sub.name));
          t = performance.now();
        } else {
          result = pending;
          t = result.endedMono ?? performance.now();
        }
        const ms = t - t0;
        // Read before anything is counted: a refused output fails the call, counted once (below).
        const out = result.checked ? result.accepted : readOutput(result.output);
        b.recordLatency(ms);
        if (result.fuel) b.fuelUsed += result.fuel;
        this.observed(sub.name, hook, ms, result.fuel ?? 0);
        b.ok++;
        b.consecutiveFailures = 0;
        if (b.hookStreak.size > 0) b.hookStreak.delete(hook);
        report.delivered.push(sub.name);
        if (out?.context) report.injected.push({ plugin: sub.name, context: out.context });
        if (out) report.results.push({ plugin: sub.name, value: out.value });
        // Work done here for this call (its output read, observers) is not the next call's time.
        if (!result.checked || this.callObservers.size > 0) t = performance.now();
      } catch (err) {
        const ms = performance.now() - t0;
        b.recordLatency(ms);
        const e = toCallError(err);
        // A failed call's fuel counts too: a plugin running out of its budget is not a cheap one.
        if (e.fuel) b.fuelUsed += e.fuel;
        this.observed(sub.name, hook, ms, e.fuel ?? 0, e.kind);
        if (e.kind === "timeout") b.cooloffUntil.set(hook, this.now() + this.cooloffMs);
        this.fail(sub.name, b, e, hook);
        report.failed.push({ plugin: sub.name, kind: e.kind, message: e.message });
        t = performance.now(); // the failure's log and quarantine are not the next call's time
      }
    }
    return report;
  }

  private readonly outputReaders = new Map<HookName, OutputReader>();

  /**
   * The check emit applies to every output of `hook` (throws PluginCallError "bad_output" to refuse
   * one): readHookOutput under this dispatcher's limits, made once per hook: a closure per emit
   * showed in the fan-out's profile, and subscribers may call it unbound (it is handed on as is).
   */
  outputReader(hook: HookName): OutputReader {
    let read = this.outputReaders.get(hook);
    if (!read) {
      const limits = this.outputLimits;
      read = Object.assign((output: string | undefined) => readHookOutput(hook, output, limits), { ignoresOutput: !readsOutput(hook) });
      this.outputReaders.set(hook, read);
    }
    return read;
  }

  private observed(plugin: string, hook: HookName, ms: number, fuel: number, failure?: FailureKind): void {
    if (this.callObservers.size === 0) return;
    for (const fn of this.callObservers) fn({ plugin, hook, ms, fuel, failure });
  }

  /** Counts and logs a failed call. */
  private record(name: string, b: Bookkeeping, e: PluginCallError): void {
    b.failures[e.kind]++;
    b.lastError = `${e.kind}: ${e.message}`;
    this.log("warn", "plugin call failed", { plugin: name, kind: e.kind, error: e.message });
  }

  /** A failed hook call: counted, and one step nearer the hook's and the plugin's quarantine. */
  private fail(name: string, b: Bookkeeping, e: PluginCallError, hook: HookName): void {
    this.record(name, b, e);
    // `unavailable` is the host's fault (its database down, the plugin closed), not the plugin's;
    // its stored KV quota reached is refused with no harm done, and a quarantine would stop the very
    // hooks whose clean-up frees it (on_session_delete), on every node (an outside probe): counted
    // and logged, but neither brings the plugin nearer to a quarantine. A per-call limit still does.
    // Nor does it make the hook a "failing hook" (a reload storm showed one the plugin never failed).
    if (sparesQuarantine(e)) return;
    b.failingHook = hook;
    b.consecutiveFailures++;
    const streak = (b.hookStreak.get(hook) ?? 0) + 1;
    b.hookStreak.set(hook, streak);
    // A hook that keeps failing while the plugin's other hooks succeed is quarantined alone, so
    // it neither silences them nor fails silently forever (it shows in plugins list).
    if (streak >= this.quarantineAfter && !b.hookQuarantine.has(hook)) {
      const reason = `hook ${hook} quarantined after ${streak} consecutive failures; last: ${b.lastError}`;
      b.hookQuarantine.set(hook, reason);
      this.log("error", "plugin hook quarantined", { plugin: name, hook, reason });
    }
    if (b.quarantined === null && b.consecutiveFailures >= this.quarantineAfter) {
      b.quarantined = `quarantined after ${b.consecutiveFailures} consecutive failures; last: ${b.lastError}`;
      this.log("error", "plugin quarantined", { plugin: name, reason: b.quarantined });
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
    const next = new Map<HookName, Array<{ sub: HookSubscriber; book: Bookkeeping }>>();
    for (const s of sorted) for (const h of s.hooks) (next.get(h) ?? next.set(h, []).get(h)!).push({ sub: s, book: this.book(s.name) });
    this.byHook = next;
  }
}

/**
 * One emit's payload and its JSON text, each built at most once, by the first subscriber that asks
 * (a WASM plugin reads only the text, a TS callback only the object).
 */
class PayloadOf<H extends HookName> {
  private text: string | undefined;
  private object: Readonly<HookPayload<H>> | undefined;
  constructor(
    private readonly hook: H,
    private readonly fields: HookFields<H>,
  ) {}
  get value(): Readonly<HookPayload<H>> {
    return (this.object ??= Object.freeze({ hook: this.hook, schema_version: SCHEMA_VERSION, ...this.fields }) as unknown as HookPayload<H>);
  }
  json(): string {
    // The envelope's two fields, then the fields': the same JSON as the object's (no field is named
    // hook or schema_version), without copying them into a new object first (a fresh, spread object
    // stringified at about twice the cost, per emit).
    return (this.text ??= `{"hook":"${this.hook}","schema_version":${SCHEMA_VERSION}${fieldsJson(this.fields)}}`);
  }
}

/** Text JSON.stringify writes as it is inside quotes: no quote, backslash, control or surrogate unit. */
const PLAIN_TEXT = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/;

/**
 * `,"name":value` for each field, as JSON.stringify writes them (undefined left out; the names are
 * the catalogue's, plain identifiers, written as they are): a hook's
 * fields are a flat object of strings and numbers plus a few nested values, and writing the plain
 * strings and finite numbers here took a 7-field payload from ~850 to ~450 ns on Node 20; anything
 * else (a nested value, a string to escape, null, a boolean) is JSON.stringify's.
 */
function fieldsJson(fields: object): string {
  let out = "";
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    const text = typeof value === "string" && PLAIN_TEXT.test(value) ? `"${value}"` : typeof value === "number" && Number.isFinite(value) ? String(value) : JSON.stringify(value);
    out += `,"${name}":${text}`;
  }
  return out;
}

/** One plugin's delivery of an emit (a class, not an object of closures: one is made per call). */
class HookDelivery<H extends HookName> implements Delivery<H> {
  constructor(
    readonly hook: H,
    private readonly shared: PayloadOf<H>,
    readonly deadline: number,
    readonly readOutput: OutputReader,
    readonly startedAt: number,
    readonly startedMono: number,
  ) {}
  get payload(): Readonly<HookPayload<H>> {
    return this.shared.value;
  }
  json(): string {
    return this.shared.json();
  }
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
