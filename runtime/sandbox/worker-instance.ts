// A plugin instance in a worker thread of its own (worker-thread.ts), driven from the server's
// thread: calls go out as messages, and the worker's host calls come back here, where the host
// functions run as they do in-thread, against a call context made of the blocks the call named.
// A host call costs one message each way (tens of µs), whatever the plugin's memory holds.
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import type { CallContext } from "@extism/extism";
import type { HostFunction } from "../../host-api/binding.ts";
import { WORKER_EXEC_ARGV, workerModule } from "./worker-code.ts";
import { placeholder, PLACEHOLDER_INDEX, placeholderRank, SETTLE, SharedArea, WORKER_PROTOCOL, type FromWorker, type HostCallAnswer, type HostCallRequest, type HostCallResult, type Tally, type ToWorker, type WorkerStart } from "./worker-protocol.ts";


/** The most of one block that crosses to this thread with a host call: above every host limit. */
const MAX_SHIPPED_BYTES = 16 * 1024 * 1024;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

const WORKER_URL = new URL("./worker-thread.ts", import.meta.url);

async function startWorker(data: WorkerStart, transfer: MessagePort[]): Promise<Worker> {
  return new Worker(await workerModule(WORKER_URL), { workerData: data, transferList: transfer as never[], execArgv: WORKER_EXEC_ARGV });
}

export interface WorkerInstanceOptions {
  module: WebAssembly.Module;
  /** The host functions by import module, as the in-thread SDK would get them. */
  functions: Record<string, Record<string, HostFunction>>;
  /** What the worker serves itself (see WorkerStart). */
  local: WorkerStart["local"];
  /**
   * Settles what the worker's own functions did since the last crossing (fuel, input read, the
   * export's end), before the host call that follows or the call's result; may throw (out of fuel).
   */
  account(tally: Tally): void;
  /** The worker's log lines: the SDK's (kernel log_* functions) and the module's WASI stdout/stderr. */
  log(level: "info" | "warn" | "error" | "debug", source: "log" | "stdout" | "stderr", message: string): void;
}

export class WorkerInstance {
  private pending: { resolve(out: Uint8Array | string | undefined): void; reject(err: Error): void } | undefined;
  /** The instance (re)building in the worker: settles at its "ready" or its failure. */
  private starting: { resolve(): void; reject(err: Error): void } | undefined;
  /**
   * The first error a host function of the running call threw (typed: fuel, timeout, denied...):
   * the worker unwinds the call with its message, and the call fails with the error itself.
   */
  private hostError: unknown;
  /** Where answers' blocks cross to the worker (HostCallAnswer). */
  private readonly answers = new SharedArea();
  /** Where each call's input crosses (see ToWorker). */
  private readonly inputArea = new SharedArea();
  private closed = false;

  private constructor(
    private readonly worker: Worker,
    private readonly port: MessagePort,
    private readonly flag: Int32Array,
    private opts: WorkerInstanceOptions,
  ) {
    worker.on("message", (m: FromWorker) => {
      if (m.type === "host") return void this.serve(m);
      if (m.type === "log") return this.opts.log(m.level, m.source, m.message);
      if (m.type === "ready") return this.started();
      const pending = this.pending;
      this.pending = undefined;
      this.hold(false);
      const hostError = this.hostError;
      this.hostError = undefined;
      let settling: unknown;
      try {
        this.opts.account(m.tally);
      } catch (err) {
        settling = err;
      }
      // A call that came back is done unless settling its tally failed (as in-thread, a host error
      // the module got past does not fail it); a failed one fails with the host's typed error, if
      // one unwound it, else with the worker's, rebuilt from its name and message.
      if (m.type === "done" && settling === undefined) return pending?.resolve(m.output ?? undefined);
      const failed = m as Extract<FromWorker, { type: "failed" }>;
      const err = ((m.type === "done" ? settling : hostError ?? settling) as Error | undefined) ?? (failed.name === "RangeError" ? new RangeError(failed.message) : new Error(failed.message));
      if (pending) pending.reject(err);
      else this.started(err);
    });
    const exited = (why: string) => {
      const err = new Error(`the plugin's worker thread ${why}`);
      this.started(err);
      this.pending?.reject(err);
      this.pending = undefined;
      this.closed = true;
      this.hold(false);
    };
    worker.on("error", (err: Error) => exited(`failed: ${err.message}`));
    worker.on("exit", (code: number) => exited(`exited (code ${code})`));
  }

  /** Starts a worker and builds the instance there (its start function runs, host calls served here). */
  static async start(opts: WorkerInstanceOptions): Promise<WorkerInstance> {
    const { port1, port2 } = new MessageChannel();
    const flag = new SharedArrayBuffer(4);
    const functions = Object.fromEntries(Object.entries(opts.functions).map(([ns, fns]) => [ns, Object.keys(fns)]));
    const worker = await startWorker({ protocol: WORKER_PROTOCOL, module: opts.module, functions, port: port2, flag, maxShippedBytes: MAX_SHIPPED_BYTES, local: opts.local }, [port2]);
    const instance = new WorkerInstance(worker, port1, new Int32Array(flag), opts);
    await instance.whenBuilt();
    return instance;
  }

  /** Whether the worker is alive and idle: then a fresh instance can be built in it (rebuild). */
  get reusable(): boolean {
    return !this.closed && !this.pending && !this.starting;
  }

  /**
   * A fresh instance of the module in the same worker, with the host functions of the next
   * generation: after a failed call that came back (a stuck one terminates its worker instead).
   * Starting a worker thread costs 50-300 ms; this, the instantiation alone.
   */
  async rebuild(opts: Pick<WorkerInstanceOptions, "functions" | "account">): Promise<void> {
    this.opts = { ...this.opts, ...opts };
    this.worker.postMessage({ type: "rebuild" } satisfies ToWorker);
    await this.whenBuilt();
  }

  /** Waits for the instance being built in the worker; on failure the worker is closed. */
  private async whenBuilt(): Promise<void> {
    this.hold(true);
    try {
      await new Promise<void>((resolve, reject) => (this.starting = { resolve, reject }));
    } catch (err) {
      await this.close();
      throw err;
    }
    this.hold(false);
  }

  /** The build in the worker ended: ready, or failed with `err`. */
  private started(err?: Error): void {
    const starting = this.starting;
    this.starting = undefined;
    if (err) starting?.reject(err);
    else starting?.resolve();
  }

  /** Runs export `fn` with `input` (the worker's kernel is reset by each call): its output, if any. */
  call(fn: string, input: Uint8Array): Promise<Uint8Array | string | undefined> {
    if (this.closed) return Promise.reject(new Error("the plugin's worker thread is closed"));
    if (this.pending) return Promise.reject(new Error("plugin is not reentrant"));
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.hostError = undefined;
      this.hold(true);
      this.inputArea.reset();
      this.inputArea.put(input);
      this.worker.postMessage({ type: "call", fn, input: this.inputArea.buffer, length: input.byteLength } satisfies ToWorker);
    });
  }

  /**
   * An idle worker does not keep the process alive (a CLI run ends without closing every plugin);
   * one that is starting or running a call does, or the process could end while awaiting it.
   */
  private hold(busy: boolean): void {
    if (busy) this.worker.ref();
    else this.worker.unref();
  }

  /** Terminates the worker, whatever it is doing (a stuck call included). */
  async close(): Promise<void> {
    this.closed = true;
    this.port.close();
    await this.worker.terminate();
  }

  /** Runs a host call's function here, against a context of the blocks it named. */
  private async run(req: HostCallRequest): Promise<HostCallResult> {
    const fn = this.opts.functions[req.ns]?.[req.name];
    if (!fn) throw new Error(`host function "${req.ns}" "${req.name}" does not exist`);
    const ctx = new RemoteContext(req);
    let result = fn(ctx as unknown as CallContext, ...req.args);
    if (result instanceof Promise) result = await result;
    // The stored blocks go into the answer area, which the worker reads before its next host call.
    this.answers.reset();
    const stored = ctx.stored.map((bytes): [number, number] => [this.answers.put(bytes), bytes.byteLength]);
    const scratch = this.answers.buffer;
    return { result, stored, ...(scratch ? { scratch } : {}) };
  }

  /** Runs one host call of the worker's (or only settles its tally) and wakes it with the answer. */
  private async serve(req: HostCallRequest): Promise<void> {
    let answer: HostCallAnswer;
    try {
      this.opts.account(req.tally);
      answer = req.ns === SETTLE ? { id: req.id, result: undefined, stored: [] } : { id: req.id, ...(await this.run(req)) };
    } catch (err) {
      this.hostError ??= err;
      answer = { id: req.id, error: err instanceof Error ? err.message : String(err) };
    }
    if (!this.closed) this.reply(answer);
  }

  /** Sends the answer and wakes the worker (which reads the port until the answer is there). */
  private reply(answer: HostCallAnswer): void {
    this.port.postMessage(answer);
    Atomics.store(this.flag, 0, 1);
    Atomics.notify(this.flag, 0);
  }
}

/**
 * The part of Extism's CallContext host functions use (length, read, store), over the blocks a
 * worker's host call named: a block it did not name reads as no block; what the host function
 * stores gets a placeholder address, stored in the worker's kernel when the answer arrives.
 */
class RemoteContext {
  readonly stored: Uint8Array[] = [];
  constructor(private readonly req: HostCallRequest) {}

  private find(addr: bigint): { length: number; bytes: Uint8Array | null } | undefined {
    const index = Number(BigInt(addr) >> 48n);
    if (index === PLACEHOLDER_INDEX) {
      const bytes = this.stored[placeholderRank(BigInt(addr))];
      return bytes ? { length: bytes.byteLength, bytes } : undefined;
    }
    const block = this.req.blocks.find(([i]) => i === index);
    if (!block) return undefined;
    const [, length, bytes, at] = block;
    // A view of the scratch buffer serves this host call only (the worker reuses it after).
    return { length, bytes: at >= 0 && this.req.scratch ? new Uint8Array(this.req.scratch, at, length) : bytes };
  }

  length(addr: bigint): bigint {
    return BigInt(this.find(addr)?.length ?? 0);
  }

  read(addr: bigint): { bytes(): Uint8Array; text(): string } | null {
    const bytes = this.find(addr)?.bytes;
    if (!bytes) return null;
    return { bytes: () => bytes, text: () => decoder.decode(bytes) };
  }

  store(data: string | Uint8Array): bigint {
    this.stored.push(typeof data === "string" ? encoder.encode(data) : data);
    return placeholder(this.stored.length - 1);
  }
}
