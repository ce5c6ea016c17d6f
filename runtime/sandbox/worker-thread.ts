// The worker thread of a plugin that runs off the server's thread (worker-instance.ts starts it;
// worker-protocol.ts is what the two say). The module runs here in-thread under the Extism SDK, so
// its kernel (alloc, input and output, load/store) is local, and so are the functions that need its
// memory (call-io.ts, block-copy.ts, WASI) and the meter's end of a call; what those cost is
// tallied and settled with the server's meter at the next crossing. Every other host function is a
// stub that sends the call to the server's thread with the blocks it names and blocks
// (Atomics.wait) until the answer is on its own port. (The SDK's own worker sends every block of
// the call both ways at each host call, serves the kernel across threads, and can miss a wake-up:
// a 500 ms stall.)
import { parentPort, receiveMessageOnPort, workerData } from "node:worker_threads";
import createPlugin, { type CallContext, type Plugin } from "@extism/extism";
import { createWasi } from "../../host-api/wasi.ts";
import { blockCopyFunctions } from "./block-copy.ts";
import { CallIo } from "./call-io.ts";
import { FUEL_SLICE, HOST_CALL_FUEL } from "./fuel.ts";
import { LogBudget } from "./log-budget.ts";
import { INLINE_BLOCK_BYTES, placeholder, SETTLE, WORKER_PROTOCOL, type FromWorker, type HostCallAnswer, type HostCallRequest, type Tally, type ToWorker, type WorkerStart } from "./worker-protocol.ts";

const FIRST_BLOCK = 1n << 48n;
const SETTLE_FUEL = FUEL_SLICE;
/** A log line crosses at most this long (the server keeps less). */
const MAX_LOG_CHARS = 4_000;

// Serves only in a worker that worker-instance.ts started (this module is also imported for types).
if (parentPort && (workerData as Partial<WorkerStart> | null)?.protocol === WORKER_PROTOCOL) serve(parentPort, workerData as WorkerStart);

function serve(parent: NonNullable<typeof parentPort>, start: WorkerStart): void {
  const flag = new Int32Array(start.flag);
  const post = (m: FromWorker) => parent.postMessage(m);
  let tally: Tally = { fuel: 0, inputRead: false };
  // The plugin's log rate limit, applied here too: a line over it never becomes a message (one
  // fd_write of 32,768 short lines was 32,768 messages for the server's thread to receive).
  const logBudget = new LogBudget();
  /** The tally so far, handed over at a crossing, and a fresh one begun. */
  const takeTally = (): Tally => {
    const t = tally;
    t.droppedLogs = logBudget.takeDropped();
    tally = { fuel: 0, inputRead: false };
    return t;
  };
  const postLog = (level: "info" | "warn" | "error" | "debug", source: "log" | "stdout" | "stderr", message: string) => {
    if (logBudget.take()) post({ type: "log", level, source, message: message.slice(0, MAX_LOG_CHARS) });
  };
  /** One crossing: the request goes out with the tally, and this thread waits for its answer. */
  const cross = (req: Omit<HostCallRequest, "tally" | "type">): Exclude<HostCallAnswer, { error: string }> => {
    Atomics.store(flag, 0, 0);
    parent.postMessage({ type: "host", ...req, tally: takeTally() } satisfies HostCallRequest);
    Atomics.wait(flag, 0, 0);
    const answer = receiveMessageOnPort(start.port)?.message as HostCallAnswer | undefined;
    if (!answer) throw new Error(`host function ${req.name}: no answer from the host`);
    if ("error" in answer) throw new Error(answer.error);
    return answer;
  };
  /**
   * Fuel the functions served here cost: tallied, and settled by a crossing once it reaches
   * SETTLE_FUEL, so a module calling only them still runs out of fuel about when it would in-thread
   * (its own code refills only every WORKER_GRANT units).
   */
  const charge = (units: number) => {
    tally.fuel += units;
    if (tally.fuel >= SETTLE_FUEL) cross({ ns: SETTLE, name: SETTLE, args: [], blocks: [] });
  };
  /**
   * Where large blocks cross (HostCallRequest): one buffer per worker, shared with the server's
   * thread, grown as needed up to maxShippedBytes. The server reads it only during the host call,
   * while this thread waits, so it is reused from call to call.
   */
  let scratch: Uint8Array | undefined;
  const scratchFor = (bytes: number): Uint8Array => {
    if (!scratch || scratch.byteLength < bytes) {
      const grown = new Uint8Array(new SharedArrayBuffer(Math.min(start.maxShippedBytes, Math.max(bytes, 2 * (scratch?.byteLength ?? 0)))));
      if (scratch) grown.set(scratch);
      scratch = grown;
    }
    return scratch;
  };
  let memory: WebAssembly.Memory | undefined;
  const io = new CallIo(() => memory, start.local.maxOutputBytes, charge);

  const hostCall = (ns: string, name: string) => (ctx: CallContext, ...args: unknown[]) => {
    const blocks: HostCallRequest["blocks"] = [];
    let used = 0; // of the scratch buffer, this call
    for (const a of args) {
      if (typeof a !== "bigint" || a < FIRST_BLOCK) continue;
      const index = Number(a >> 48n);
      if (blocks.some(([i]) => i === index)) continue; // named twice: shipped once
      const block = ctx.read(a); // a view of the block, not a copy; null: no block there
      if (!block) continue;
      const bytes = block.bytes();
      if (bytes.byteLength <= INLINE_BLOCK_BYTES) {
        blocks.push([index, bytes.byteLength, bytes, -1]);
      } else if (used + bytes.byteLength <= start.maxShippedBytes) {
        scratchFor(used + bytes.byteLength).set(bytes, used);
        blocks.push([index, bytes.byteLength, null, used]);
        used += bytes.byteLength;
      } else {
        blocks.push([index, bytes.byteLength, null, -1]);
      }
    }
    const answer = cross({ ns, name, args, blocks, ...(used > 0 ? { scratch: scratch!.buffer as SharedArrayBuffer } : {}) });
    let { result } = answer;
    answer.stored.forEach(([at, length], rank) => {
      const address = ctx.store(new Uint8Array(answer.scratch!, at, length)); // a copy into the kernel
      if (result === placeholder(rank)) result = address;
    });
    return result;
  };

  const log = (level: "info" | "warn" | "error" | "debug") => (message: string) => postLog(level, "log", String(message));
  const logger = { trace: log("debug"), debug: log("debug"), info: log("info"), log: log("info"), warn: log("warn"), error: log("error") } as unknown as Console;

  // Block copies cost what the server's wrapper charges a host call: HOST_CALL_FUEL plus 1 unit per 16 bytes of the block.
  const copies = blockCopyFunctions(() => memory);
  const charged = (fn: (ctx: CallContext, block: bigint, at: bigint, len: bigint) => bigint) => (ctx: CallContext, block: bigint, at: bigint, len: bigint) => {
    charge(HOST_CALL_FUEL + Math.floor(Number(ctx.length(block)) / 16));
    return fn(ctx, block, at, len);
  };
  const ended = (left: number, code?: number) => {
    tally.end = { code, left };
    return start.local.kept;
  };
  // WASI calls cost what the server's wrapper charges a host call that names no block.
  const wasi = createWasi({
    memory: () => memory,
    output: (fd, line) => postLog(fd === 1 ? "info" : "warn", fd === 1 ? "stdout" : "stderr", line),
  });
  const local: Record<string, Record<string, (ctx: CallContext, ...args: any[]) => unknown>> = {
    [start.local.wasiModule]: Object.fromEntries(
      Object.entries(wasi).map(([name, fn]) => [name, (_ctx: CallContext, ...args: any[]) => (charge(HOST_CALL_FUEL), fn(...args))]),
    ),
    [start.local.hostModule]: {
      hookbox_input_read: (_ctx: CallContext, dest: bigint, len: bigint) => ((tally.inputRead = true), io.readInput(dest, len)),
      hookbox_output_write: (_ctx: CallContext, src: bigint, len: bigint) => io.writeOutput(src, len),
      hookbox_block_read: charged(copies.hookbox_block_read),
      hookbox_block_write: charged(copies.hookbox_block_write),
    },
    [start.local.fuelModule]: {
      end: (_ctx: CallContext, left: number) => ended(left),
      finish: (_ctx: CallContext, code: number, left: number) => ended(left, code),
    },
  };
  const functions = Object.fromEntries(
    Object.entries(start.functions).map(([ns, names]) => [ns, Object.fromEntries(names.map((name) => [name, local[ns]?.[name] ?? hostCall(ns, name)]))]),
  );
  const failure = (err: unknown): FromWorker => {
    const e = err instanceof Error ? err : new Error(String(err));
    return { type: "failed", name: e.name, message: e.message, tally: takeTally() };
  };

  let plugin: Plugin | undefined;
  /** A fresh instance of the module (its start function runs): at start, and after a failed call. */
  const build = () => {
    plugin = undefined;
    memory = undefined;
    createPlugin({ wasm: [{ module: start.module }] }, { functions, runInWorker: false, memory: { maxVarBytes: 1 }, logger, logLevel: "info" }).then(
      async (p) => {
        plugin = p;
        memory = (await p.getInstance()).exports.memory as WebAssembly.Memory | undefined;
        post({ type: "ready" });
      },
      (err: unknown) => post(failure(err)),
    );
  };
  parent.on("message", (m: ToWorker) => {
    if (m.type === "rebuild") return build();
    if (!plugin) return post(failure(new Error("no instance (it failed to start)")));
    io.begin(m.input);
    plugin
      .call(m.fn, m.input)
      .then(
        (out) => post({ type: "done", output: io.output ?? (out ? out.bytes() : null), tally: takeTally() }),
        (err: unknown) => post(failure(err)),
      )
      .finally(() => io.end());
  });
  build();
}
