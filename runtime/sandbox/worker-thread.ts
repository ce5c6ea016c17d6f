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
import { abort, MAX_ERROR_CHARS } from "./call-failure.ts";
import { CallIo } from "./call-io.ts";
import { FIRST_BLOCK, FUEL_SLICE, hostCallCost, MAX_CALL_BLOCKS, pastCallBlocks } from "./fuel.ts";
import { LogBudget } from "./log-budget.ts";
import { INLINE_BLOCK_BYTES, placeholder, SETTLE, SharedArea, WORKER_PROTOCOL, type FromWorker, type HostCallAnswer, type HostCallRequest, type Tally, type ToWorker, type WorkerStart } from "./worker-protocol.ts";

const SETTLE_FUEL = FUEL_SLICE;
/** Reads of the port, once woken, before the wait for a late answer's message sleeps between them; and its bound. */
const LATE_ANSWER_SPINS = 1_000;
const LATE_ANSWER_MS = 1_000;
/** Never notified: Atomics.wait on it is a sleep. */
const nap = new Int32Array(new SharedArrayBuffer(4));
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
    t.inputRead = io.inputRead; // once the call read its input, every later tally says so
    t.droppedLogs = logBudget.takeDropped();
    tally = { fuel: 0, inputRead: false };
    return t;
  };
  const postLog = (level: "info" | "warn" | "error" | "debug", source: "log" | "stdout" | "stderr", message: string) => {
    if (logBudget.take()) post({ type: "log", level, source, message: message.slice(0, MAX_LOG_CHARS) });
  };
  let crossings = 0;
  /** One crossing: the request goes out with the tally, and this thread waits for its answer. */
  const cross = (req: Omit<HostCallRequest, "tally" | "type" | "id">): Exclude<HostCallAnswer, { error: string }> => {
    const id = ++crossings;
    Atomics.store(flag, 0, 0);
    parent.postMessage({ type: "host", id, ...req, tally: takeTally() } satisfies HostCallRequest);
    const answer = answerTo(id);
    if ("error" in answer) throw new Error(answer.error);
    return answer;
  };
  /**
   * The answer to crossing `id`. The flag says it was sent, but its message can reach this port a
   * moment later (seen on Node and Deno): until then the port is read again. An answer to another
   * crossing is not this one's (none should be left over: each crossing waits for its own); dropped.
   */
  const answerTo = (id: number): HostCallAnswer => {
    let lateSince: number | undefined;
    for (let reads = 0; ; ) {
      Atomics.wait(flag, 0, 0); // until the answer is sent, however long its host function takes
      const answer = receiveMessageOnPort(start.port)?.message as HostCallAnswer | undefined;
      if (answer?.id === id) return answer;
      // The last crossing's notify can land after this crossing cleared the flag: a wake-up with
      // the flag still 0 is that one, and this answer is not sent yet (however long it takes).
      if (answer !== undefined || Atomics.load(flag, 0) === 0 || reads++ < LATE_ANSWER_SPINS) continue;
      // Woken, and the message still not here: it comes within microseconds, so wait without
      // spinning, and not for ever (the server's thread may be gone); timed from here, not from
      // the request (a slow host function's answer is not late).
      lateSince ??= performance.now();
      if (performance.now() - lateSince > LATE_ANSWER_MS) throw new Error(`host function: no answer from the host within ${LATE_ANSWER_MS} ms`);
      Atomics.wait(nap, 0, 0, 1);
    }
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
  /** Where a host call's large blocks cross (HostCallRequest), up to maxShippedBytes a call. */
  const scratch = new SharedArea(start.maxShippedBytes);
  let memory: WebAssembly.Memory | undefined;
  const io = new CallIo(() => memory, start.local.maxOutputBytes, charge);

  const hostCall = (ns: string, name: string) => (ctx: CallContext, ...args: unknown[]) => {
    const blocks: HostCallRequest["blocks"] = [];
    scratch.reset();
    for (const a of args) {
      if (typeof a !== "bigint" || a < FIRST_BLOCK) continue;
      const index = Number(a >> 48n);
      if (blocks.some(([i]) => i === index)) continue; // named twice: shipped once
      const block = ctx.read(a); // a view of the block, not a copy; null: no block there
      if (!block) continue;
      const bytes = block.bytes();
      const inline = bytes.byteLength <= INLINE_BLOCK_BYTES;
      blocks.push([index, bytes.byteLength, inline ? bytes : null, inline ? -1 : scratch.put(bytes)]);
    }
    const shared = scratch.buffer;
    const answer = cross({ ns, name, args, blocks, ...(shared ? { scratch: shared } : {}) });
    let { result } = answer;
    answer.stored.forEach(([at, length], rank) => {
      const address = ctx.store(new Uint8Array(answer.scratch!, at, length)); // a copy into the kernel
      // Past MAX_CALL_BLOCKS the SDK's addresses break (fuel.ts): the server's meter is told (its
      // kernel_oom), which fails the call as memory.
      if (pastCallBlocks(address)) {
        cross({ ns: start.local.fuelModule, name: "kernel_oom", args: [], blocks: [] });
        throw new Error(`more than ${MAX_CALL_BLOCKS} blocks in one call`);
      }
      if (result === placeholder(rank)) result = address;
    });
    return result;
  };

  const log = (level: "info" | "warn" | "error" | "debug") => (message: string) => postLog(level, "log", String(message));
  const logger = { trace: log("debug"), debug: log("debug"), info: log("info"), log: log("info"), warn: log("warn"), error: log("error") } as unknown as Console;

  // Block copies and WASI calls cost what the server's wrapper charges a host call (hostCallCost).
  const copies = blockCopyFunctions(() => memory);
  const metered =
    (fn: (ctx: CallContext, ...args: any[]) => unknown) =>
    (ctx: CallContext, ...args: any[]) => (charge(hostCallCost(ctx, args)), fn(ctx, ...args));
  const ended = (left: number, code?: number) => {
    tally.end = { code, left };
    return start.local.kept;
  };
  const wasi = createWasi({
    memory: () => memory,
    output: (fd, line) => postLog(fd === 1 ? "info" : "warn", fd === 1 ? "stdout" : "stderr", line),
  });
  const local: Record<string, Record<string, (ctx: CallContext, ...args: any[]) => unknown>> = {
    [start.local.kernelModule]: io.kernelFunctions(),
    [start.local.wasiModule]: Object.fromEntries(
      Object.entries(wasi).map(([name, fn]) => [name, metered((_ctx: CallContext, ...args: any[]) => fn(...args))]),
    ),
    [start.local.hostModule]: {
      hookbox_input_read: (_ctx: CallContext, dest: bigint, len: bigint) => io.readInput(dest, len),
      hookbox_output_write: (_ctx: CallContext, src: bigint, len: bigint) => io.writeOutput(src, len),
      hookbox_block_read: metered(copies.hookbox_block_read),
      hookbox_block_write: metered(copies.hookbox_block_write),
      // Here, not on the server's thread: only the bounded text crosses (call-failure.ts).
      hookbox_abort: abort,
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
    // Cut here: the SDK's error_set text is whole (16 MB crossing to the server's thread cost it
    // 100-180 ms per call); a little over what the server keeps, so it still says it was cut.
    return { type: "failed", name: e.name, message: e.message.slice(0, MAX_ERROR_CHARS + 100), tally: takeTally() };
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
    io.begin(m.input ? new Uint8Array(m.input, 0, m.length) : new Uint8Array(0));
    plugin
      .call(m.fn) // no kernel input block: the module reads CallIo's (read-only)
      .then(
        (out) => post({ type: "done", output: io.output ?? (out ? out.bytes() : null), tally: takeTally() }),
        (err: unknown) => post(failure(err)),
      )
      .finally(() => io.end());
  });
  build();
}
