// In-thread suspension where the runtime has no JS Promise Integration (Node 20): the module is
// transformed by Binaryen's asyncify (rewind-worker.mjs) so that a call of an async host function
// (hookbox_http) unwinds the module's stack into its memory and returns to the caller; once the
// host function's promise settles, the export is called again and rewinds to where it was, and the
// host function answers. The thread is free meanwhile, as with JSPI, where a worker thread would
// cost a round trip between threads per host call (milliseconds a call, measured).
//
// The unwound stack needs a place in the module's own memory, and none is free for sure (a bump
// allocator owns everything up to memory.size). So the last DATA_BYTES of memory lend it: their
// bytes are saved before the unwind and put back as soon as it is done, and again around the
// rewind. No code of the module runs while they are lent, so it never sees the difference.
import { Worker } from "node:worker_threads";
import type { CallContext } from "@extism/extism";
import { PluginCallError } from "../../hooks/failures.ts";
import type { HostFunction } from "../../host-api/binding.ts";
import { WORKER_EXEC_ARGV } from "./worker-code.ts";
import { suspendWeights } from "./instrument.ts";

/** Import module and name of the function the added export calls (see rewind-worker.mjs). */
export const REWIND_CONTEXT_MODULE = "hookbox:rewind";
export const REWIND_CONTEXT_NAME = "context";
/** The export the sandbox calls once per instance, through the SDK, to learn its call context. */
export const REWIND_CONTEXT_EXPORT = "hookbox_rewind_context";

/** Room for the unwound stack: a frame saves its locals, a plugin's stack at a host call is a few frames. */
const DATA_BYTES = 16 * 1024;
/** Modules above this size are not transformed (Binaryen's memory grows with them): they run in a worker. */
const MAX_TRANSFORM_BYTES = 8 * 1024 * 1024;
/**
 * Modules heavier than this (instrument.ts suspendWeights: locals x call sites + instructions) are not transformed:
 * Binaryen's memory grows with it (1,000,000: about 350 MiB at its peak, 4 s), and it runs in the
 * server's process. They run in a worker.
 */
const MAX_SUSPEND_WEIGHT = 1_000_000;
/**
 * A transform still running after this long is given up (the plugin stays in a worker): the
 * plugins' own modules take 0.1-0.5 s, and one that takes longer holds up the next in the queue.
 */
const TRANSFORM_MS = 20_000;

const enum State {
  Normal = 0,
  Unwinding = 1,
  Rewinding = 2,
}

interface AsyncifyExports {
  asyncify_start_unwind(at: number): void;
  asyncify_stop_unwind(): void;
  asyncify_start_rewind(at: number): void;
  asyncify_stop_rewind(): void;
  asyncify_get_state(): number;
}

/**
 * `bytes` (an instrumented module) transformed so that its calls of `imports` ("module.name") can
 * suspend, with the context export added; rejects when Binaryen cannot (the caller keeps the worker).
 * Transforms run one at a time, in one worker thread kept while any is waiting: a load of many
 * http: plugins would otherwise start a Binaryen (~100 MB, ~1 s) per module at once.
 */
export function rewindable(bytes: Uint8Array, imports: readonly string[]): Promise<Uint8Array> {
  if (bytes.byteLength > MAX_TRANSFORM_BYTES) return Promise.reject(new Error(`module larger than ${MAX_TRANSFORM_BYTES} bytes`));
  const weight = suspendWeights.get(bytes) ?? Infinity;
  if (weight > MAX_SUSPEND_WEIGHT) return Promise.reject(new Error(`module too heavy to make rewindable (locals x call sites + instructions ${weight}, at most ${MAX_SUSPEND_WEIGHT})`));
  return transforms.run(bytes, imports);
}

interface Job {
  id: number;
  bytes: Uint8Array;
  imports: readonly string[];
  resolve(bytes: Uint8Array): void;
  reject(err: Error): void;
}

class TransformQueue {
  private worker: Worker | undefined;
  private readonly jobs: Job[] = [];
  private lastId = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  run(bytes: Uint8Array, imports: readonly string[]): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      this.jobs.push({ id: ++this.lastId, bytes, imports, resolve, reject });
      if (this.jobs.length === 1) this.next();
    });
  }

  /** Hands the first waiting job to the worker (started if there is none), under TRANSFORM_MS. */
  private next(): void {
    const job = this.jobs[0];
    if (!job) return this.drop();
    const worker = (this.worker ??= this.start());
    this.timer = setTimeout(() => this.fail(new Error(`transform took longer than ${TRANSFORM_MS / 1000} s`)), TRANSFORM_MS);
    worker.postMessage({ id: job.id, bytes: job.bytes, imports: job.imports });
  }

  private start(): Worker {
    const worker = new Worker(new URL("./rewind-worker.mjs", import.meta.url), {
      workerData: { contextModule: REWIND_CONTEXT_MODULE, contextName: REWIND_CONTEXT_NAME, contextExport: REWIND_CONTEXT_EXPORT },
      execArgv: WORKER_EXEC_ARGV,
    });
    worker.on("message", (m: { id: number; bytes?: Uint8Array; error?: string }) => {
      const job = this.jobs[0];
      if (job?.id !== m.id) return; // the answer to a job given up on
      clearTimeout(this.timer);
      this.jobs.shift();
      if (m.bytes) job.resolve(new Uint8Array(m.bytes));
      else {
        job.reject(new Error(m.error ?? "no answer"));
        this.drop(); // Binaryen may be left unusable by what it refused (an abort): the next job gets a new one
      }
      this.next();
    });
    // Deno reports the exit from within terminate(): a worker already dropped is not this one.
    const gone = (err: Error) => void (this.worker === worker && this.fail(err));
    worker.on("error", gone);
    worker.on("exit", (code: number) => gone(new Error(`transform worker exited (code ${code})`)));
    return worker;
  }

  /** The running job fails (its worker stuck or gone); the next one gets a new worker. */
  private fail(err: Error): void {
    clearTimeout(this.timer);
    this.drop();
    this.jobs.shift()?.reject(err);
    this.next();
  }

  /** Terminates the worker (a no-op for one that has exited); the next job starts another. */
  private drop(): void {
    const worker = this.worker;
    this.worker = undefined;
    void worker?.terminate();
  }
}

const transforms = new TransformQueue();

/**
 * The suspensions of one instance of a rewindable module. Its async host functions go through
 * call(); its exports are run by DirectCaller.callRewinding, which calls the export again after each
 * unwind (unwound() gives the promise to wait for, rewind() prepares the next run).
 */
export class Rewinder {
  private readonly asyncify: AsyncifyExports;
  /** Where the data area starts in memory, while lent. */
  private at = 0;
  /**
   * The module's bytes under the data area while it is lent (`savedBytes` of them), and the unwound
   * stack while suspended (`stackBytes`): buffers kept for the instance's life, so a suspension
   * makes no garbage (three 16 KiB copies a call lengthened the tail of the calls around it).
   */
  private readonly saved = new Uint8Array(DATA_BYTES);
  private readonly stack = new Uint8Array(DATA_BYTES);
  private savedBytes = 0;
  private stackBytes = 0;
  /** Where the data area is in a suspension's steps. */
  private lent: "unwinding" | "suspended" | "rewinding" | undefined;
  private pending: Promise<void> | undefined;
  private outcome: { value: unknown } | { error: unknown } | undefined;
  private running = false;
  private closed = false;

  constructor(
    exports: WebAssembly.Exports,
    private readonly memory: () => WebAssembly.Memory | undefined,
  ) {
    this.asyncify = exports as unknown as AsyncifyExports;
  }

  /** Whether `exports` are a rewindable module's. */
  static fits(exports: WebAssembly.Exports): boolean {
    return ["asyncify_start_unwind", "asyncify_stop_unwind", "asyncify_start_rewind", "asyncify_stop_rewind", "asyncify_get_state"].every((n) => typeof exports[n] === "function");
  }

  /**
   * A call of async host function `fn` by the module: suspends the running export (the answer, an
   * i64, is not used: the module unwinds); rewound, answers what `fn`'s promise settled with.
   */
  call(fn: HostFunction, ctx: CallContext, args: unknown[]): unknown {
    if (this.asyncify.asyncify_get_state() === State.Rewinding) return this.resume();
    // Outside callRewinding (an SDK call) there is no caller to run the export again.
    if (!this.running || this.pending) throw new PluginCallError("trap", "an async host function (hookbox_http) can only be called from an export the host calls");
    // The area first: once `fn` runs, its promise must have a handler whatever happens (a rejection
    // nobody handles ends the process).
    this.lend();
    const answer = fn(ctx, ...args) as Promise<unknown>;
    this.pending = answer.then(
      (value) => void (this.outcome = { value }),
      (error: unknown) => void (this.outcome = { error }),
    );
    this.lent = "unwinding";
    this.asyncify.asyncify_start_unwind(this.at);
    return 0n;
  }

  /** An export's run begins (DirectCaller.callRewinding). */
  begin(): void {
    this.running = true;
  }

  /** What a run failed with: a trap in mid-unwind is the unwound stack outgrowing its room. */
  explain(err: unknown): unknown {
    // A frame past the area's end: the area is the top of memory, so the write traps (out of
    // bounds; or asyncify's own check, `unreachable`), never lands on the module's own bytes.
    const tooDeep = err instanceof WebAssembly.RuntimeError && this.lent === "unwinding" && this.asyncify.asyncify_get_state() === State.Unwinding;
    return tooDeep ? new PluginCallError("trap", `the call's stack was too deep to suspend at an async host function (over ${DATA_BYTES} bytes of frames)`) : err;
  }

  /** The run is over, however it ended: nothing is left lent or pending. */
  end(): void {
    this.running = false;
    if (this.lent === "unwinding" || this.lent === "rewinding") this.restore(); // a trap in mid-step
    this.lent = this.pending = this.outcome = undefined;
  }

  /** Called when the export returned: the promise to await when it unwound, else undefined. */
  unwound(): Promise<void> | undefined {
    if (this.asyncify.asyncify_get_state() !== State.Unwinding) return undefined;
    this.asyncify.asyncify_stop_unwind();
    const bytes = this.bytes();
    // The unwind wrote the header and the frames up to the header's first word.
    const used = Math.min(Math.max(8, new DataView(bytes.buffer, this.at, 4).getUint32(0, true) - this.at), this.savedBytes);
    this.stack.set(bytes.subarray(this.at, this.at + used));
    this.stackBytes = used;
    this.savedBytes = used;
    this.restore();
    this.lent = "suspended";
    return this.pending;
  }

  /** Before the export is called again: the unwound stack back in place, rewinding. */
  rewind(): void {
    if (this.closed) throw new PluginCallError("unavailable", "the instance was discarded while its call was suspended");
    const bytes = this.bytes();
    const n = this.stackBytes;
    this.saved.set(bytes.subarray(this.at, this.at + n));
    this.savedBytes = n;
    bytes.set(this.stack.subarray(0, n), this.at);
    this.pending = undefined;
    this.lent = "rewinding";
    this.asyncify.asyncify_start_rewind(this.at);
  }

  /** The instance is discarded: a suspended call is not run again. */
  close(): void {
    this.closed = true;
  }

  /** Saves the top of memory and writes the data area's header there (throws when there is no room). */
  private lend(): Uint8Array {
    const bytes = this.bytes();
    const size = Math.min(DATA_BYTES, bytes.byteLength);
    if (size < 64) throw new PluginCallError("memory", "no memory to suspend the call in");
    this.at = bytes.byteLength - size;
    this.saved.set(bytes.subarray(this.at, this.at + size));
    this.savedBytes = size;
    // The area's header: where the next frame goes, where the area ends.
    const header = new DataView(bytes.buffer, this.at, 8);
    header.setUint32(0, this.at + 8, true);
    header.setUint32(4, this.at + size, true);
    return bytes;
  }

  /** The host function's answer, as the rewound module resumes (its call returns it). */
  private resume(): unknown {
    this.asyncify.asyncify_stop_rewind();
    this.restore();
    this.lent = undefined;
    const outcome = this.outcome;
    this.outcome = undefined;
    if (!outcome) throw new PluginCallError("trap", "rewound without an answer");
    if ("error" in outcome) throw outcome.error;
    return outcome.value;
  }

  /** The module's own bytes back under the data area. */
  private restore(): void {
    this.bytes().set(this.saved.subarray(0, this.savedBytes), this.at);
  }

  private bytes(): Uint8Array {
    const memory = this.memory();
    if (!(memory instanceof WebAssembly.Memory)) throw new PluginCallError("trap", `the module exports no memory named "memory" to suspend the call in`);
    return new Uint8Array(memory.buffer);
  }
}
