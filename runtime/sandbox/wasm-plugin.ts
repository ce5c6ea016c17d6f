// One sandboxed plugin instance on top of Extism: runs an export with the call's input under fuel,
// deadline and memory limits, maps every failure to a typed PluginCallError, and rebuilds the
// instance from the cached compiled module after any failure (a trapped instance keeps its globals).
//
// In-thread by default (~µs per call). A plugin whose granted host functions are asynchronous
// (sessions:read reads libSQL, http fetches) runs in an Extism worker, where the host functions are
// awaited and the SDK's timeoutMs can cancel a call stuck in one.
import createPlugin, { type CallContext, type Plugin } from "@extism/extism";
import { PluginCallError } from "../../hooks/failures.ts";
import { createWasi, WasiExit } from "../../host-api/wasi.ts";
import type { HostBinding, HostFunction } from "../../host-api/binding.ts";
import { FuelMeter } from "./fuel.ts";
import { FUEL_MODULE } from "./instrument.ts";
import { INITIALIZE_EXPORT } from "./wasi-adapt.ts";

export const HOST_MODULE = "extism:host/user";
/**
 * Where a module's "wasi_snapshot_preview1" imports are served (renamed at load: Extism refuses that
 * module name unless its own node:wasi-based WASI is on). host-api/wasi.ts is capability-free.
 */
export const WASI_SANDBOX_MODULE = "hookbox:wasi";

/**
 * Host functions the sandbox itself provides (beside host-api's): `hookbox_input_read(dest, len)`
 * copies the call's whole input into the plugin's linear memory at `dest` and returns `len`, or 0
 * when it cannot (worker mode, bad range): the plugin then falls back to the kernel's input_load_u64.
 * plugins-wasm/lib's beginCall() calls it first thing, so a library plugin's export that never calls
 * it forgot beginCall(). `hookbox_abort(message)` ends the call as a trap carrying the message
 * (lib's abort handler: `throw new Error("x")` arrives as "abort: x at file:line:col").
 */
export const SANDBOX_FUNCTION_NAMES = ["hookbox_input_read", "hookbox_abort"] as const;

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
  /** Run in an Extism worker (required when host functions are async). */
  inWorker: boolean;
}

export interface SandboxResult {
  /** Output text, undefined when the plugin wrote none. */
  output: string | undefined;
  fuel: number;
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

// A fan-out hands every plugin the same payload string (Delivery.json() builds it once): encode it
// once too. One entry is enough; plugins of one emit are called one after another.
let lastText: string | undefined;
let lastBytes = new Uint8Array(0);
function utf8(text: string): Uint8Array {
  if (text !== lastText) {
    lastBytes = encoder.encode(text);
    lastText = text;
  }
  return lastBytes;
}

export class WasmPlugin {
  private instance: Plugin | undefined;
  private building: Promise<Plugin> | undefined;
  private readonly meter: FuelMeter;
  /** Calls into one instance never overlap (Extism instances are not reentrant): FIFO hand-off. */
  private busy = false;
  private readonly waiting: Array<() => void> = [];
  private closed = false;
  /** The running call's input and the instance's memory, for hookbox_input_read (in-thread only). */
  private input: Uint8Array | undefined;
  private memory: WebAssembly.Memory | undefined;
  /** Built with plugins-wasm/lib (imports hookbox_input_read): every export must call beginCall(). */
  private readonly usesLib: boolean;
  private inputRead = false;
  private readonly wasi: Record<string, HostFunction>;

  constructor(private readonly opts: SandboxOptions) {
    this.meter = new FuelMeter(opts.limits.fuel, opts.limits.memoryPages);
    this.usesLib = WebAssembly.Module.imports(opts.module).some((i) => i.module === HOST_MODULE && i.name === "hookbox_input_read");
    const wasi = createWasi({
      memory: () => this.memory,
      output: (fd, line) => opts.host.log?.(fd === 1 ? "info" : "warn", fd === 1 ? "stdout" : "stderr", line),
    });
    // Extism passes its call context first; WASI functions take only their own arguments.
    this.wasi = Object.fromEntries(Object.entries(wasi).map(([name, fn]) => [name, (_ctx: CallContext, ...args: any[]) => fn(...args)]));
  }

  get name(): string {
    return this.opts.name;
  }

  /** Builds the first instance now so that load errors (unresolved imports...) surface at load. */
  async warm(): Promise<void> {
    await this.ensureInstance();
  }

  exports(): string[] {
    return WebAssembly.Module.exports(this.opts.module)
      .filter((e) => e.kind === "function")
      .map((e) => e.name);
  }

  /**
   * Calls `fn` with `input`; the call must finish by `deadline` (epoch ms). `accept` may refuse the
   * output (throw a PluginCallError) before the call's effects (KV writes) are committed.
   */
  async call(fn: string, input: string, deadline: number, accept?: (output: string | undefined) => void): Promise<SandboxResult> {
    if (this.busy) await new Promise<void>((wake) => this.waiting.push(wake));
    else this.busy = true;
    try {
      return await this.run(fn, input, deadline, accept);
    } finally {
      const next = this.waiting.shift();
      if (next) next(); // stays busy: the lock passes straight to the next caller
      else this.busy = false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.discardInstance();
  }

  private async run(fn: string, input: string, deadline: number, accept?: (output: string | undefined) => void): Promise<SandboxResult> {
    if (this.closed) throw new PluginCallError("unavailable", `${this.name} is closed`);
    // The deadline covers the wait for the instance too (callers rely on it: enforcesDeadline).
    if (Date.now() > deadline) throw new PluginCallError("timeout", `waited past its deadline for the busy instance`);
    const plugin = this.instance ?? (await this.ensureInstance());
    const { host, limits } = this.opts;
    this.meter.start(deadline);
    host.begin(deadline);
    let ok = false;
    try {
      this.input = utf8(input);
      this.inputRead = false;
      const out = await plugin.call(fn, this.input);
      this.checkReturn(fn);
      const bytes = out?.bytes();
      if (bytes && bytes.byteLength > limits.maxOutputBytes) {
        throw new PluginCallError("bad_output", `output of ${bytes.byteLength} bytes exceeds max_output_bytes ${limits.maxOutputBytes}`);
      }
      const output = bytes && bytes.byteLength > 0 ? decoder.decode(bytes) : undefined;
      accept?.(output);
      ok = true;
      const committing = host.end(true);
      if (committing) await committing;
      return { output, fuel: this.meter.used };
    } catch (err) {
      const e = this.classify(err);
      // Any fault may leave the module's globals or heap inconsistent: start the next call fresh.
      if (e.kind !== "bad_output" && e.kind !== "conflict") await this.discardInstance();
      throw e;
    } finally {
      this.input = undefined;
      this.meter.stop();
      if (!ok) host.end(false);
    }
  }

  /** Extism's convention (ignored by its JS SDK): a non-zero i32 return is a failure. */
  private checkReturn(fn: string): void {
    const code = this.meter.returnCode;
    if (code !== 0) throw new PluginCallError("trap", `${fn} returned ${code} (non-zero is a failure) without an error message`);
    if (this.usesLib && !this.inputRead) {
      throw new PluginCallError(
        "trap",
        `${fn} returned without calling beginCall() (plugins-wasm/lib): it must be the first call of every export, else the heap of earlier calls is never reset and memory runs out`,
      );
    }
  }

  private classify(err: unknown): PluginCallError {
    if (err instanceof PluginCallError) return err;
    if (err instanceof WasiExit) return new PluginCallError("trap", err.message);
    if (this.meter.memoryRefused) return this.meter.memoryError();
    const message = err instanceof Error ? err.message : String(err);
    if (message.includes("canceled due to timeout")) {
      return new PluginCallError("timeout", `ran past ${this.opts.limits.timeoutMs} ms`);
    }
    if (err instanceof RangeError && /call stack/i.test(message)) return new PluginCallError("trap", "stack overflow");
    return new PluginCallError("trap", message.replace(/^Plugin-originated error: /, "plugin error: "));
  }

  private ensureInstance(): Promise<Plugin> {
    if (this.instance) return Promise.resolve(this.instance);
    this.building ??= this.build().then(
      (p) => {
        this.instance = p;
        this.building = undefined;
        return p;
      },
      (err) => {
        this.building = undefined;
        throw err;
      },
    );
    return this.building;
  }

  // Extism's kernel hands the input over 8 bytes per host call (a BigInt each way): a 300 KB
  // on_session_delete payload (10k ids) took ~37k calls per plugin and dominated a bulk delete.
  private readonly inputReadFn = (_ctx: CallContext, dest: bigint, len: bigint): bigint => {
    this.inputRead = true;
    const { input, memory } = this;
    if (!input || !memory) return 0n;
    const d = Number(dest);
    const n = Number(len);
    if (n !== input.byteLength || d < 0 || d + n > memory.buffer.byteLength) return 0n;
    new Uint8Array(memory.buffer, d, n).set(input);
    return len;
  };

  private async build(): Promise<Plugin> {
    const { module, host, inWorker, limits } = this.opts;
    const importsWasi = WebAssembly.Module.imports(module).some((i) => i.module === WASI_SANDBOX_MODULE);
    if (importsWasi && inWorker) {
      // WASI passes pointers into the instance's memory, which a worker keeps in its own thread.
      throw new Error("a WASI module runs in-thread only: it cannot be granted sessions:read or http: (those run plugins in a worker)");
    }
    const plugin = await createPlugin(
      { wasm: [{ module }] },
      {
        functions: {
          [HOST_MODULE]: { ...host.functions, hookbox_input_read: this.inputReadFn, hookbox_abort: abort },
          [FUEL_MODULE]: this.meter.functions,
          [WASI_SANDBOX_MODULE]: this.wasi,
        },
        runInWorker: inWorker,
        ...(inWorker ? { timeoutMs: limits.timeoutMs, nodeWorkerArgs: { execArgv: [] } } : {}),
        // Host-side buffers (input, output, vars) stay within the plugin's memory allowance too.
        memory: { maxPages: limits.memoryPages, maxVarBytes: 64 * 1024 },
        logLevel: "silent",
      },
    );
    // A worker's instance lives in another thread: there the plugin falls back to the kernel path.
    this.memory = inWorker ? undefined : ((await plugin.getInstance()).exports.memory as WebAssembly.Memory | undefined);
    if (this.exports().includes(INITIALIZE_EXPORT)) await this.initialize(plugin);
    return plugin;
  }

  /** A WASI reactor's start-up (its renamed `_initialize`), now that WASI sees its memory; metered. */
  private async initialize(plugin: Plugin): Promise<void> {
    this.meter.start(Date.now() + this.opts.limits.timeoutMs);
    try {
      await plugin.call(INITIALIZE_EXPORT);
    } catch (err) {
      await plugin.close().catch(() => undefined);
      throw new Error(`start-up (_initialize) failed: ${this.classify(err).message}`);
    } finally {
      this.meter.stop();
    }
  }

  private async discardInstance(): Promise<void> {
    const p = this.instance;
    this.instance = undefined;
    this.memory = undefined;
    if (p) await p.close().catch(() => undefined);
  }
}

/** hookbox_abort(message): unwinds the plugin's call with its own words. */
function abort(ctx: CallContext, message: bigint): never {
  const text = ctx.read(message)?.text() ?? "(unreadable message)";
  throw new PluginCallError("trap", text.slice(0, 2000));
}
