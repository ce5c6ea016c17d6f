// One sandboxed plugin instance on top of Extism: runs an export with the call's input under fuel,
// deadline and memory limits, maps every failure to a typed PluginCallError, and rebuilds the
// instance from the cached compiled module after any failure (a trapped instance keeps its globals).
//
// In-thread by default (~µs per call). A plugin whose granted host functions are asynchronous (http
// fetches) stays in-thread where the runtime can suspend the call while it awaits (CAN_SUSPEND), and
// runs in a worker thread of its own elsewhere (worker-instance.ts: tens of µs per host call); so
// does, for a while, a plugin whose in-thread call outgrew its slice (inline-slice.ts: the call runs
// again there, and the server's thread is never held longer than the slice). hookbox owns every
// deadline itself: in-thread the fuel meter checks the clock at each refill and host call; a worker
// or suspended call that has not answered by its deadline plus WORKER_GRACE_MS is abandoned (the
// call fails as `timeout`, the lock is released) and its instance discarded (a worker is terminated).
//
// Every host function the module imports is wrapped (host-calls.ts): it charges fuel and checks the
// clock; in a worker it runs here, on the server's thread, as the worker's host call. The kernel's alloc and log imports are charged and capped
// inside the module (instrument.ts), in either mode.
import createPlugin, { type CallContext, type Plugin } from "@extism/extism";
import { PluginCallError } from "../../hooks/failures.ts";
import { createWasi } from "../../host-api/wasi.ts";
import type { HostBinding, HostFunction } from "../../host-api/binding.ts";
import { blockCopyFunctions } from "./block-copy.ts";
import { CallIo } from "./call-io.ts";
import { abort, callFailure, MAX_ERROR_CHARS } from "./call-failure.ts";
import { CallLock, MAX_TIMER_MS } from "./call-lock.ts";
import { directCaller, type DirectCaller } from "./direct-call.ts";
import { FuelMeter, keptGrant, WORKER_GRANT } from "./fuel.ts";
import { HostCalls, isAsync } from "./host-calls.ts";
import { countWork, DEMOTION_MS, INLINE_SLICE_MS, needsTurn, SliceExpired, turnEventLoop } from "./inline-slice.ts";
import { HOST_MODULE, refusedImport, WASI_SANDBOX_MODULE } from "./imports.ts";
import { FUEL_MODULE, KERNEL_MODULE } from "./instrument.ts";
import { LogBudget } from "./log-budget.ts";
import { within } from "../util/within.ts";
import { ownInput, payloadBytes, syncCallEnded, syncCallStarted } from "./payload-bytes.ts";
import { REWIND_CONTEXT_EXPORT, REWIND_CONTEXT_MODULE, REWIND_CONTEXT_NAME, Rewinder } from "./rewind.ts";
import { INITIALIZE_EXPORT } from "./wasi-adapt.ts";
import { WorkerInstance } from "./worker-instance.ts";
import type { Tally } from "./worker-protocol.ts";

/** How long past its deadline a worker call may take to answer before its worker is terminated. */
export const WORKER_GRACE_MS = 250;

export interface SandboxLimits {
  fuel: number;
  memoryPages: number;
  timeoutMs: number;
  maxOutputBytes: number;
}

export interface SandboxOptions {
  name: string;
  /** The instrumented, compiled module (see instrument.ts / module-cache.ts). */
  module: WebAssembly.Module;
  limits: SandboxLimits;
  host: HostBinding;
  /**
   * Always run in a worker thread (tests of the worker path). Otherwise the sandbox picks: a plugin
   * with async host functions runs in a worker only where CAN_SUSPEND is false and it has no
   * rewindable module.
   */
  inWorker?: boolean;
  /**
   * The module made rewindable for the async host functions (rewind.ts): in-thread instances are
   * built from it and suspend by unwinding (used, where given, instead of JSPI).
   */
  rewindable?: WebAssembly.Module;
}

/**
 * Whether this runtime can suspend a WASM call while an async host function awaits (JS Promise
 * Integration: Deno 2; not Node 20). Then a plugin with async host functions (http:) runs
 * in-thread like any other, and its awaits leave the thread free; without
 * it such a plugin runs in a worker thread, one round trip between threads per host call.
 */
export const CAN_SUSPEND =
  typeof (WebAssembly as { Suspending?: unknown }).Suspending === "function" && typeof (WebAssembly as { promising?: unknown }).promising === "function";

export interface SandboxResult {
  /** Output text, undefined when the plugin wrote none. */
  output: string | undefined;
  fuel: number;
  /** True when `accept` ran on the output; what it returned (e.g. the parsed hook result). */
  checked?: boolean;
  accepted?: unknown;
  /** performance.now() when an in-thread call was done, its output read (see CallStart). */
  endedMono?: number | undefined;
}

/**
 * The clock at a call's start as its caller read it (epoch ms on Date.now's clock, with a fraction;
 * performance.now() ms): the sandbox takes them instead of reading the clock twice more per call
 * (45-100 ns a read, a tenth of a small plugin's call), and tells the call's end as endedMono.
 */
export interface CallStart {
  readonly startedAt: number;
  readonly startedMono: number;
}

/** The smallest module the SDK takes: an exported memory, nothing else. */
const EMPTY_MODULE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 3, 1, 0, 1, 7, 10, 1, 6, 109, 101, 109, 111, 114, 121, 2, 0]);
let sdkWarm: Promise<void> | undefined;

/**
 * The SDK's first instance in a process costs ~30 ms on Node (its kernel compiled), later ones under
 * 1 ms: paid once, before an in-thread build arms its slice, so that the slice measures the start
 * function, not the SDK's set-up (a first load whose start function made a host call could fail).
 */
function warmSdk(): Promise<void> {
  sdkWarm ??= createPlugin({ wasm: [{ module: new WebAssembly.Module(EMPTY_MODULE) }] }, { functions: {}, useWasi: false }).then(
    (p) => p.close(),
    () => undefined, // a real build reports what fails
  );
  return sdkWarm;
}

/**
 * Reads a call's output before its effects commit: throws (a PluginCallError) to refuse it.
 * `ignoresOutput`: an observer hook's, which takes any output, one past max_output_bytes too.
 */
export type AcceptOutput = ((output: string | undefined) => unknown) & { readonly ignoresOutput?: boolean };

const decoder = new TextDecoder();

/** An instance: in-thread (the SDK's) or in a worker thread of its own (worker-instance.ts). */
type Instance = Plugin | WorkerInstance;

export class WasmPlugin {
  private instance: Instance | undefined;
  /** Whether the live (or building) instance runs in a worker. */
  private instanceInWorker = false;
  /** The idle worker of an instance discarded after a failed call: the next worker instance is built in it. */
  private spare: WorkerInstance | undefined;
  private building: Promise<Instance> | undefined;
  /** Calls run in a worker until then (epoch ms): an in-thread call outgrew its slice. */
  private workerUntil = 0;
  private readonly meter: FuelMeter;
  private readonly lock = new CallLock();
  private closed = false;
  /** The running in-thread call's time on the thread (performance.now()), for countWork. */
  private onThreadFrom: number | undefined;
  private onThreadUntil: number | undefined;
  /** The live in-thread instance's synchronous caller, known from its first call's first host call. */
  private direct: DirectCaller | undefined;
  /** The live in-thread instance's exports, until `direct` is made. */
  private liveExports: WebAssembly.Exports | undefined;
  private memory: WebAssembly.Memory | undefined;
  /** Built with plugins-wasm/lib (imports hookbox_input_read): every export must call beginCall(). */
  private readonly usesLib: boolean;
  /** The running call's input and output (hookbox_input_read, hookbox_output_write): in-thread instances. */
  private readonly io: CallIo;
  /** Its host functions as the instance imports them: charged, checked, abandoned with it (host-calls.ts). */
  private readonly hostCalls: HostCalls;
  private readonly wasi: Record<string, HostFunction>;
  private readonly logBudget = new LogBudget();
  /** Some host function is async: an in-thread call (CAN_SUSPEND) can wait on it, suspended. */
  private readonly suspends: boolean;
  /** The live in-thread instance's suspensions, when it was built from the rewindable module. */
  private rewinder: Rewinder | undefined;
  /** The module made rewindable (SandboxOptions.rewindable, or useRewindable later). */
  private rewindable: WebAssembly.Module | undefined;
  /** Its rewindable module could not start (see build): its instances are built in a worker. */
  private startsInWorker = false;

  constructor(private readonly opts: SandboxOptions) {
    this.meter = new FuelMeter(opts.limits.fuel, opts.limits.memoryPages, Date.now, opts.limits.timeoutMs);
    this.hostCalls = new HostCalls(this.meter, () => this.instanceInWorker);
    this.io = new CallIo(() => this.memory, opts.limits.maxOutputBytes, (units) => this.meter.charge(units));
    const imports = WebAssembly.Module.imports(opts.module);
    this.usesLib = imports.some((i) => i.module === HOST_MODULE && i.name === "hookbox_input_read");
    this.suspends = (opts.host.asyncFunctions?.size ?? 0) > 0 || Object.values(opts.host.functions).some(isAsync);
    this.rewindable = opts.rewindable;
    const wasi = createWasi({
      memory: () => this.memory,
      output: (fd, line) => this.log(fd === 1 ? "info" : "warn", fd === 1 ? "stdout" : "stderr", line),
    });
    // Extism passes its call context first; WASI functions take only their own arguments.
    this.wasi = Object.fromEntries(Object.entries(wasi).map(([name, fn]) => [name, (_ctx: CallContext, ...args: any[]) => fn(...args)]));
  }

  /** A line for the plugin's log, within its rate limit. */
  private log(level: "debug" | "info" | "warn" | "error", source: "log" | "stdout" | "stderr", line: string): void {
    if (this.logBudget.take()) this.opts.host.log?.(level, source, line.slice(0, MAX_ERROR_CHARS * 2));
  }

  get name(): string {
    return this.opts.name;
  }

  /** Where the live instance runs its calls (for operators and the bench); undefined before it is built. */
  get path(): "in-thread" | "in-thread, suspended" | "in-thread, rewinding" | "worker" | undefined {
    if (!this.instance) return undefined;
    if (this.instanceInWorker) return "worker";
    return this.rewinder ? "in-thread, rewinding" : this.suspends ? "in-thread, suspended" : "in-thread";
  }

  /** Builds the first instance now so that load errors (unresolved imports...) surface at load. */
  async warm(): Promise<void> {
    await this.ensureInstance();
  }

  private wantsWorker(now = Date.now()): boolean {
    return this.opts.inWorker === true || this.startsInWorker || (this.suspends && !CAN_SUSPEND && !this.rewindable) || now < this.workerUntil;
  }

  /**
   * The module made rewindable, once it is (made after the load, in the background): the next call
   * leaves the worker and builds its instance in-thread from it.
   */
  useRewindable(module: WebAssembly.Module): void {
    if (this.closed) return;
    this.rewindable = module;
    // An idle instance built without it goes now; a busy worker instance at the next call (attemptAfterWaits).
    if (!this.lock.busy && this.instance && !this.rewinder) void this.discardInstance(false);
  }

  /** The plugin's calls run in a worker for DEMOTION_MS. */
  private demote(what: string): void {
    this.workerUntil = Date.now() + DEMOTION_MS;
    this.opts.host.log?.("warn", "log", `${what} ran past the ${INLINE_SLICE_MS} ms in-thread slice: its calls run in a worker thread for the next ${DEMOTION_MS / 1000} s`);
  }

  exports(): string[] {
    return WebAssembly.Module.exports(this.opts.module)
      .filter((e) => e.kind === "function")
      .map((e) => e.name);
  }

  /**
   * Calls `fn` with `input`; the call must finish by `deadline` (epoch ms). `accept` may refuse the
   * output (throw a PluginCallError) before the call's effects (KV writes) are committed; what it
   * returns comes back as `accepted` (a function, not a closure per call: see invoke()).
   */
  async call(fn: string, input: string, deadline: number, accept?: AcceptOutput): Promise<SandboxResult> {
    return await this.callNow(fn, input, deadline, accept);
  }

  /**
   * call(), answered without a promise when it can be: an idle in-thread instance whose call wrote
   * nothing to commit runs and returns synchronously, so a fan-out to such plugins awaits none of
   * them. Never throws: a failure is a rejected promise.
   */
  callNow(fn: string, input: string, deadline: number, accept?: AcceptOutput, started?: CallStart): Promise<SandboxResult> | SandboxResult {
    if (!this.lock.take()) return this.lock.wait(deadline).then(() => this.holding(fn, input, deadline, accept));
    return this.holding(fn, input, deadline, accept, started);
  }

  /** Runs the call with the lock held, then passes the lock on. */
  private holding(fn: string, input: string, deadline: number, accept?: AcceptOutput, started?: CallStart): Promise<SandboxResult> | SandboxResult {
    let result: Promise<SandboxResult> | SandboxResult;
    try {
      result = this.attempt(fn, input, deadline, accept, started);
    } catch (err) {
      result = Promise.reject(err);
    }
    if (!(result instanceof Promise)) {
      this.lock.release();
      return result;
    }
    return result
      .catch((err) => {
        // An in-thread call that outgrew its slice runs again, from the start, in a worker.
        if (!(err instanceof SliceExpired)) throw err;
        this.demote(`a call of ${fn}`);
        return this.attempt(fn, input, deadline, accept);
      })
      .finally(() => this.lock.release());
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.discardInstance();
  }

  /**
   * One try. A live in-thread instance with no turn of the event loop due runs at once (invoke);
   * otherwise the waits come first: a switch between thread and worker, a turn of the event loop,
   * the instance's (re)build.
   */
  private attempt(fn: string, input: string, deadline: number, accept?: AcceptOutput, started?: CallStart): Promise<SandboxResult> | SandboxResult {
    if (this.closed) throw new PluginCallError("unavailable", `${this.name} is closed`);
    const now = started ? started.startedAt : Date.now();
    const plugin = this.instance;
    if (plugin && !this.instanceInWorker && !this.wantsWorker(now) && !needsTurn() && now <= deadline) {
      return this.invoke(plugin, fn, input, deadline, accept, false, now, started ? started.startedMono : performance.now());
    }
    return this.attemptAfterWaits(fn, input, deadline, accept);
  }

  private async attemptAfterWaits(fn: string, input: string, deadline: number, accept?: AcceptOutput): Promise<SandboxResult> {
    let now = Date.now();
    const inWorker = this.wantsWorker(now);
    if (this.instance && this.instanceInWorker !== inWorker) await this.discardInstance(false);
    if (!inWorker && needsTurn()) {
      await turnEventLoop();
      now = Date.now();
    }
    // The deadline covers the wait for the instance too (callers rely on it: enforcesDeadline).
    if (now > deadline) throw new PluginCallError("unavailable", `waited past its deadline for its busy instance`);
    let plugin = this.instance;
    if (!plugin) {
      const building = performance.now();
      plugin = await this.ensureInstance(deadline);
      // A start function runs on the thread too (up to a slice): it counts, and may call for a turn.
      if (!inWorker) {
        countWork(performance.now() - building);
        if (needsTurn()) await turnEventLoop();
      }
      now = Date.now();
    }
    return await this.invoke(plugin, fn, input, deadline, accept, inWorker, now, performance.now());
  }

  /**
   * Runs the export under the meter and the host's call hooks. Synchronous from start to end where
   * it can be (in-thread, no async host function, the direct caller known, nothing to commit);
   * any failure goes through failed(), asynchronously.
   */
  private invoke(plugin: Instance, fn: string, input: string, deadline: number, accept: AcceptOutput | undefined, inWorker: boolean, now: number, mono: number): Promise<SandboxResult> | SandboxResult {
    this.meter.start(deadline, this.stretch(inWorker, now));
    this.opts.host.begin(deadline);
    // In-thread, this call's time on the thread counts towards the next turn of the event loop: from
    // here until the call has come back and its output is read (not the waits for its commit or a
    // discard after it).
    this.onThreadFrom = inWorker ? undefined : mono;
    this.onThreadUntil = undefined;
    let out: Uint8Array | undefined;
    try {
      const direct = inWorker || this.suspends ? undefined : this.direct;
      // The plugin reads the input through the sandbox's functions (CallIo), never as a kernel
      // block it could write to: one emit's bytes serve every plugin of it.
      const bytes = direct || inWorker ? payloadBytes(input) : ownInput(payloadBytes(input));
      this.io.begin(bytes);
      this.hostCalls.beginCall();
      if (!direct) {
        return this.invokeLater(plugin, fn, bytes, deadline, inWorker).then(
          (bytes) => this.complete(fn, bytes, accept),
          (err) => this.failed(err, false),
        );
      }
      syncCallStarted();
      try {
        out = direct.call(fn);
      } finally {
        syncCallEnded();
      }
    } catch (err) {
      return this.failed(err, false);
    }
    return this.complete(fn, this.io.output ?? out, accept);
  }

  /** invoke()'s run of the export in a worker, suspending, or through the SDK's call (a first call): the output. */
  private async invokeLater(plugin: Instance, fn: string, input: Uint8Array, deadline: number, inWorker: boolean): Promise<Uint8Array | string | undefined> {
    // In-thread with async host functions (CAN_SUSPEND), from the second call on: the export runs
    // suspending through the direct caller (rewinding, for a rewindable module's instance, from its
    // first call on); else through the SDK's call().
    const direct = inWorker ? undefined : this.direct;
    const call =
      plugin instanceof WorkerInstance ? plugin.call(fn, input)
      : direct && this.rewinder ? direct.callRewinding(fn, this.rewinder)
      : direct ? direct.callSuspending(fn)
      : plugin.call(fn).then((out) => out?.bytes()); // no kernel input block: the module reads CallIo's
    // A worker, or a suspended in-thread call, may not come back by itself: raced against the deadline.
    const out = inWorker || this.suspends ? await this.withinDeadline(call, deadline, inWorker ? "its worker was terminated" : "its suspended call was abandoned") : await call;
    this.onThreadUntil = performance.now();
    return this.io.output ?? out;
  }

  /** finish(), a failure of it going through failed(). */
  private complete(fn: string, bytes: Uint8Array | string | undefined, accept: AcceptOutput | undefined): Promise<SandboxResult> | SandboxResult {
    try {
      return this.finish(fn, bytes, accept);
    } catch (err) {
      return this.failed(err, false);
    }
  }

  /** Checks and reads the output, settles the call, and commits its writes (then it may fail as `conflict`). */
  private finish(fn: string, out: Uint8Array | string | undefined, accept: AcceptOutput | undefined): Promise<SandboxResult> | SandboxResult {
    this.checkReturn(fn);
    const { limits, host } = this.opts;
    // Text came through hookbox_output_write, which took it only within max_output_bytes. An
    // observer's output is ignored whatever it is: one past the limit is dropped, not a failure.
    if (out instanceof Uint8Array && out.byteLength > limits.maxOutputBytes) {
      if (accept?.ignoresOutput !== true) throw new PluginCallError("bad_output", `output of ${out.byteLength} bytes exceeds max_output_bytes ${limits.maxOutputBytes}`);
      out = undefined;
    }
    const output = out === undefined || out.length === 0 ? undefined : typeof out === "string" ? out : decoder.decode(out);
    const result: SandboxResult = { output, fuel: this.meter.used, checked: accept !== undefined, accepted: accept?.(output), endedMono: undefined };
    result.endedMono = this.settle(true);
    let committing: Promise<void> | undefined | void;
    try {
      committing = host.end(true);
    } catch (err) {
      return this.failed(err, true); // settled: end(false) must not follow end(true)
    }
    return committing ? committing.then(() => result, (err) => this.failed(err, true)) : result;
  }

  /**
   * The call has come back: its thread time counted, its state dropped, its writes dropped unless
   * `ok`. Returns the in-thread call's end (performance.now()).
   */
  private settle(ok: boolean): number | undefined {
    let end: number | undefined;
    if (this.onThreadFrom !== undefined) {
      end = this.onThreadUntil ?? performance.now();
      countWork(Math.max(0, end - this.onThreadFrom - this.meter.suspendedMs));
    }
    this.io.end();
    this.meter.stop();
    if (!ok) this.opts.host.end(false);
    const dropped = this.logBudget.takeDropped();
    if (dropped > 0) this.opts.host.log?.("warn", "log", `${dropped} log lines dropped (rate limit)`);
    return end;
  }

  /**
   * A failed call (`settled`: after settle(true), i.e. its commit failed): a typed PluginCallError,
   * the instance discarded after any fault but a refused output or a lost race.
   */
  private async failed(err: unknown, settled: boolean): Promise<never> {
    if (!settled) {
      this.onThreadUntil ??= performance.now();
      this.settle(false);
    }
    if (err instanceof SliceExpired) {
      await this.discardInstance();
      if (!this.hostCalls.awaited) throw err; // holding() tries again in a worker
      // Run again, it would repeat what the async host call did outside (an http: request): the
      // call fails instead (at most once), and the plugin's next calls run in a worker.
      this.demote(`a call of ${this.opts.name}`);
      throw Object.assign(new PluginCallError("timeout", `${err.message} after an async host call (http:); it is not run again in a worker, which would repeat that call`), { fuel: this.meter.handedOut() });
    }
    const e = this.classify(err);
    // A call stopped from outside (a worker terminated at its deadline) left no count: what it was handed.
    e.fuel = e.kind === "timeout" && this.meter.used === 0 ? this.meter.handedOut() : this.meter.used;
    // Any fault may leave the module's globals or heap inconsistent: start the next call fresh.
    // A timed-out worker may be stuck: it is terminated without waiting for it.
    // A call that came back leaves its worker idle: the next instance is built in it.
    if (e.kind !== "bad_output" && e.kind !== "conflict") await this.discardInstance(e.kind !== "timeout", e.kind !== "timeout");
    throw e;
  }

  /** An in-thread stretch ends INLINE_SLICE_MS from now. */
  private stretch(inWorker: boolean, now = Date.now()): { sliceEnd: number } | "worker" {
    return inWorker ? "worker" : { sliceEnd: now + INLINE_SLICE_MS };
  }

  /**
   * A worker call that has not answered by its deadline plus WORKER_GRACE_MS fails as `timeout`;
   * the caller's catch discards the instance, which terminates the worker (a stuck worker never
   * holds the lock). Extism's own time-out is not used: it can hang while restarting the worker.
   */
  private withinDeadline<T>(call: Promise<T>, deadline: number, what = "its worker was terminated"): Promise<T> {
    call.catch(() => undefined); // settles after the race was lost: nothing to report
    return within(call, Math.min(Math.max(0, deadline - Date.now()) + WORKER_GRACE_MS, MAX_TIMER_MS), (): never => {
      throw new PluginCallError("timeout", `did not answer within its time limit of ${this.opts.limits.timeoutMs} ms (limits.timeout_seconds; ${what})`);
    });
  }

  /** Extism's convention (ignored by its JS SDK): a non-zero i32 return is a failure. */
  private checkReturn(fn: string): void {
    const code = this.meter.returnCode;
    if (code !== 0) throw new PluginCallError("trap", `${fn} returned ${code} (non-zero is a failure) without an error message`);
    if (this.usesLib && !this.io.inputRead) {
      throw new PluginCallError(
        "trap",
        `${fn} returned without calling beginCall() (plugins-wasm/lib): it must be the first call of every export, else the heap of earlier calls is never reset and memory runs out`,
      );
    }
  }

  /** `err` as its caller sees it (call-failure.ts). */
  private classify(err: unknown): PluginCallError {
    return callFailure(err, { name: this.name, closed: this.closed, hostFailure: this.hostCalls.failure, meter: this.meter });
  }

  private ensureInstance(deadline = Date.now() + this.opts.limits.timeoutMs): Promise<Instance> {
    if (this.instance) return Promise.resolve(this.instance);
    if (!this.building) this.instanceInWorker = this.wantsWorker();
    this.building ??= this.build(deadline, this.instanceInWorker).then(
      (p) => {
        this.building = undefined;
        // Closed while it was being built: not kept (its worker thread would outlive the plugin).
        if (this.closed) {
          void p.close().catch(() => undefined);
          throw new PluginCallError("unavailable", `${this.name} is closed`);
        }
        this.instance = p;
        return p;
      },
      (err) => {
        this.building = undefined;
        throw err;
      },
    );
    return this.building;
  }

  // A large copy checks the deadline and slice between its chunks (in-thread: it holds the thread).
  private readonly blockCopy = blockCopyFunctions(
    () => this.memory,
    () => this.meter.checkTime(),
  );
  /** Host functions that only copy memory (charged by its bytes): a clock check only now and then. */
  private readonly cheapFunctions: ReadonlySet<HostFunction> = new Set(Object.values(this.blockCopy) as HostFunction[]);

  /**
   * The meter's `begin`, which every export of an instrumented module calls first: the first call
   * of an in-thread instance hands over its kernel context, from which its later calls run
   * synchronously (direct-call.ts).
   */
  private readonly beginFn = (ctx: CallContext): number => {
    this.learnContext(ctx);
    return this.meter.functions.begin();
  };

  /** The live instance's direct caller, from its kernel context (a host call's first argument). */
  private learnContext(ctx: CallContext): void {
    if (this.liveExports) {
      this.direct = directCaller(ctx, this.liveExports);
      this.liveExports = undefined;
    }
  }

  /**
   * An async host function of a rewindable module's instance: a synchronous import that suspends
   * the call (rewind.ts). Called during instantiation (a start function), there is nothing to rewind.
   */
  private suspending(fn: HostFunction): HostFunction {
    return (ctx: CallContext, ...args: any[]) => {
      if (!this.rewinder) throw new PluginCallError("trap", "an async host function (hookbox_http) cannot be called from a start function");
      return this.rewinder.call(fn, ctx, args);
    };
  }

  /**
   * The sandbox's own input and output functions (call-io.ts) for one instance (`generation`). They
   * take no blocks, so they charge themselves (HOST_CALL_FUEL, the output's bytes) rather than go
   * through the generic wrapper, which looks for block arguments in every call.
   */
  private ioFunctions(generation: number): Record<string, HostFunction> {
    const live = () => this.hostCalls.assertLive(generation);
    return {
      hookbox_input_read: (_ctx: CallContext, dest: bigint, len: bigint): bigint => (live(), this.io.readInput(dest, len)),
      hookbox_output_write: (_ctx: CallContext, src: bigint, len: bigint): bigint => (live(), this.io.writeOutput(src, len)),
    };
  }

  /**
   * The kernel's input functions, served by CallIo for one instance (`generation`). Each takes at
   * most one argument (an address): passed as one, not as a rest array spread again.
   */
  private kernelFunctions(generation: number): Record<string, HostFunction> {
    return Object.fromEntries(
      Object.entries(this.io.kernelFunctions()).map(([name, fn]) => [
        name,
        (ctx: CallContext, at?: bigint) => {
          this.hostCalls.assertLive(generation);
          return fn(ctx, at);
        },
      ]),
    );
  }

  /** What a worker's own functions did (worker-protocol.ts Tally), settled with this side's meter. */
  private account(tally: Tally, generation: number): void {
    this.hostCalls.assertLive(generation);
    if (tally.fuel > 0) this.meter.charge(tally.fuel);
    if (tally.inputRead) this.io.inputRead = true;
    if (tally.droppedLogs) this.logBudget.dropped += tally.droppedLogs;
    const { end } = tally;
    if (end) end.code === undefined ? this.meter.functions.end(undefined, end.left) : this.meter.functions.finish(undefined, end.code, end.left);
  }

  private chargedAll(fns: Record<string, HostFunction>, generation: number): Record<string, HostFunction> {
    return this.hostCalls.wrapAll(fns, generation, this.opts.host.asyncFunctions, this.opts.host.blockAnswers, this.cheapFunctions);
  }


  /** Extism's own logger (kernel log_* functions, its warnings): into the plugin's log, rate limited. */
  private readonly extismLogger = {
    trace: (m: string) => this.log("debug", "log", String(m)),
    debug: (m: string) => this.log("debug", "log", String(m)),
    info: (m: string) => this.log("info", "log", String(m)),
    log: (m: string) => this.log("info", "log", String(m)),
    warn: (m: string) => this.log("warn", "log", String(m)),
    error: (m: string) => this.log("error", "log", String(m)),
  } as unknown as Console;

  private async build(deadline: number, inWorker: boolean): Promise<Instance> {
    if (inWorker || !this.rewindable) return await this.buildOnce(deadline, inWorker);
    try {
      return await this.buildOnce(deadline, false);
    } catch (err) {
      if (err instanceof PluginCallError && err.kind === "timeout") throw err;
      // What cannot start rewinding (a start function or _initialize calling hookbox_http: nothing
      // to rewind into) may start in a worker, as the module did before it was made rewindable.
      this.rewindable = undefined;
      this.startsInWorker = true;
      this.opts.host.log?.("warn", "log", `its rewindable module could not start (${(err as Error).message.slice(0, 300)}): its calls run in a worker thread`);
      this.instanceInWorker = true;
      return await this.buildOnce(deadline, true);
    }
  }

  private async buildOnce(deadline: number, inWorker: boolean): Promise<Instance> {
    const { module, host, limits } = this.opts;
    const refused = refusedImport(module);
    if (refused) throw new Error(refused);
    if (!inWorker) await warmSdk();
    const generation = ++this.hostCalls.generation;
    // Nothing of an earlier build (one whose start-up failed after its exports were known) may serve this one.
    this.forgetInstance();
    const user: Record<string, HostFunction> = { ...host.functions, hookbox_abort: abort, ...this.blockCopy };
    const hostLog = user.hookbox_log;
    // hookbox_log within the plugin's log rate limit (a dropped line costs no host work).
    if (hostLog) user.hookbox_log = (ctx: CallContext, ...args: any[]) => (this.logBudget.take() ? hostLog(ctx, ...args) : undefined);
    // The start function runs during instantiation: metered, deadlined and sliced like a call; its
    // host functions learn the deadline (an http: request it makes is cut off there).
    this.meter.start(deadline, this.stretch(inWorker));
    host.begin(deadline);
    const rewindable = inWorker ? undefined : this.rewindable;
    const hostFunctions = this.chargedAll(user, generation);
    // Async host functions (charged() keeps them async) become imports that suspend by unwinding.
    if (rewindable) for (const [name, fn] of Object.entries(hostFunctions)) if (isAsync(fn)) hostFunctions[name] = this.suspending(fn);
    const functions: Record<string, Record<string, HostFunction>> = {
      [KERNEL_MODULE]: this.kernelFunctions(generation),
      [HOST_MODULE]: { ...hostFunctions, ...this.ioFunctions(generation) },
      [FUEL_MODULE]: { ...this.meter.functions, begin: this.beginFn },
      [WASI_SANDBOX_MODULE]: this.chargedAll(this.wasi, generation),
      ...(rewindable ? { [REWIND_CONTEXT_MODULE]: { [REWIND_CONTEXT_NAME]: (ctx: CallContext) => this.learnContext(ctx) } } : {}),
    };
    let plugin: Instance;
    let late = false;
    try {
      const spare = this.spare;
      this.spare = undefined;
      if (inWorker) {
        const account = (tally: Tally) => this.account(tally, generation);
        const creating = spare
          ? spare.rebuild({ functions, account }).then(() => spare)
          : WorkerInstance.start({
              module,
              functions,
              local: { kernelModule: KERNEL_MODULE, hostModule: HOST_MODULE, fuelModule: FUEL_MODULE, wasiModule: WASI_SANDBOX_MODULE, maxOutputBytes: limits.maxOutputBytes, kept: keptGrant(WORKER_GRANT, limits.fuel) },
              account,
              log: (level, source, message) => this.log(level, source, message),
            });
        plugin = await this.withinDeadline(creating, deadline).catch((err) => {
          void creating.then((p) => p.close()).catch(() => undefined); // a late instance is not kept
          late = err instanceof PluginCallError && err.kind === "timeout";
          throw err;
        });
      } else {
        void spare?.close().catch(() => undefined);
        // The module's alloc shim (instrument.ts) charges and caps the blocks it asks for, in
        // either mode; the SDK's own maxPages would re-sum every block on each alloc and keep
        // the refused one. Vars are refused (kv instead).
        plugin = await createPlugin({ wasm: [{ module: rewindable ?? module }] }, { functions, memory: { maxVarBytes: 1 }, logger: this.extismLogger, logLevel: "info" });
      }
    } catch (err) {
      this.dropStartWrites();
      // A start function is not run again in a worker: it must finish within the slice, whatever
      // the deadline.
      if (err instanceof SliceExpired) throw new Error(`instantiation failed: the start function ran past the ${INLINE_SLICE_MS} ms in-thread slice`);
      // A worker that had not answered by the call's deadline (starting a thread, or a start function
      // that spins): the call timed out, a PluginCallError like any other.
      if (late) throw new PluginCallError("timeout", `instantiation in a worker thread did not finish by the call's deadline (${limits.timeoutMs} ms time limit)`);
      throw new Error(`instantiation failed: ${this.classify(err).message}`);
    } finally {
      this.meter.stop();
    }
    // A worker's instance and memory live in its thread (which serves the I/O and WASI functions there).
    if (!(plugin instanceof WorkerInstance)) {
      const { exports } = await plugin.getInstance();
      this.memory = exports.memory as WebAssembly.Memory | undefined;
      this.liveExports = exports;
      if (rewindable) await this.learnRewinding(plugin, exports);
    }
    if (this.exports().includes(INITIALIZE_EXPORT)) await this.initialize(plugin, deadline, inWorker);
    return plugin;
  }

  /**
   * A rewindable module's instance: its calls run through the direct caller from the first one
   * (an SDK call could not be run again to rewind), so its context is learnt now, by the export
   * added for that (rewind.ts), which calls nothing else.
   */
  private async learnRewinding(plugin: Plugin, exports: WebAssembly.Exports): Promise<void> {
    if (Rewinder.fits(exports)) {
      this.rewinder = new Rewinder(exports, () => this.memory);
      await plugin.call(REWIND_CONTEXT_EXPORT);
    }
    if (!this.direct || !this.rewinder) {
      this.forgetInstance();
      await plugin.close().catch(() => undefined);
      throw new Error("instantiation failed: the rewindable module cannot be run (no asyncify exports, or no direct caller in this Extism SDK)");
    }
  }

  /** What a start-up that failed staged (a kv_set before its trap) is dropped, not committed by the next call. */
  private dropStartWrites(): void {
    try {
      this.opts.host.end(false);
    } catch {
      // Dropping staged writes cannot fail in the host's binding; a test double's may: ignored.
    }
  }

  /** A WASI reactor's start-up (its renamed `_initialize`), now that WASI sees its memory; metered. */
  private async initialize(plugin: Instance, deadline: number, inWorker: boolean): Promise<void> {
    this.meter.start(deadline, this.stretch(inWorker));
    try {
      await (plugin instanceof WorkerInstance ? this.withinDeadline(plugin.call(INITIALIZE_EXPORT, new Uint8Array(0)), deadline) : plugin.call(INITIALIZE_EXPORT));
    } catch (err) {
      this.dropStartWrites();
      this.forgetInstance();
      await plugin.close().catch(() => undefined);
      throw new Error(`start-up (_initialize) failed: ${this.classify(err).message}`);
    } finally {
      this.meter.stop();
    }
  }

  /** Forgets what reaches into the last built instance: its memory (and view) and its direct caller. */
  private forgetInstance(): void {
    this.meter.forgetGrant();
    this.memory = undefined;
    this.direct = undefined;
    this.liveExports = undefined;
    this.rewinder?.close();
    this.rewinder = undefined;
  }

  /** Drops the instance; `wait`: until it is closed (a worker terminated). */
  private async discardInstance(wait = true, keepWorker = false): Promise<void> {
    const p = this.instance;
    this.instance = undefined;
    const dropped = [this.spare, p];
    this.spare = keepWorker && p instanceof WorkerInstance && p.reusable ? p : undefined;
    this.forgetInstance();
    this.hostCalls.abandon();
    const closing = Promise.all(dropped.map((d) => (d && d !== this.spare ? d.close() : undefined))).catch(() => undefined);
    if (wait) await closing;
  }
}
