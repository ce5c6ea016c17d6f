// The worker thread of a plugin that runs off the server's thread (worker-instance.ts starts it).
// The module runs here in-thread under the Extism SDK, so its kernel (alloc, input and output,
// load/store) is local, and so are the functions that need its memory (call-io.ts, block-copy.ts)
// and the meter's end of a call; what those cost is tallied and settled by the server's thread at
// the next crossing. Every other host function is a stub that hands the call to the server's thread
// and blocks (Atomics.wait) until the answer comes back on its own port: one message each way,
// carrying only the blocks the call names. (The SDK's own worker sends every block of the call both
// ways at each host call, serves the kernel across threads, and can miss a wake-up: a 500 ms stall.)
import { parentPort, receiveMessageOnPort, workerData, type MessagePort } from "node:worker_threads";
import createPlugin, { type CallContext, type Plugin } from "@extism/extism";
import { createWasi } from "../../host-api/wasi.ts";
import { blockCopyFunctions } from "./block-copy.ts";
import { CallIo } from "./call-io.ts";
import { HOST_CALL_FUEL } from "./fuel.ts";

/** What the server's thread hands the worker at its start. */
export interface WorkerStart {
  module: WebAssembly.Module;
  /** The module's host functions, by import module: each becomes a stub here. */
  functions: Record<string, string[]>;
  /** Host calls go out and their answers come back on this port (read synchronously). */
  port: MessagePort;
  /** [0]: set to 1 by the server's thread once an answer is on the port. */
  flag: SharedArrayBuffer;
  /** A block handed to a host function crosses whole up to this many bytes (its length always). */
  maxShippedBytes: number;
  /** Where the functions served here are imported from, and what they need. */
  local: {
    hostModule: string;
    fuelModule: string;
    /** The module's WASI imports (host-api/wasi.ts: capability-free, over its memory) are served here. */
    wasiModule: string;
    maxOutputBytes: number;
    /** What the meter's end() answers in a worker: the grant the module keeps for its next call. */
    kept: number;
  };
}

/** What the functions served in the worker did since the last crossing, for the server's meter. */
export interface Tally {
  /** Fuel they cost (HOST_CALL_FUEL each, plus the bytes they copied). */
  fuel: number;
  inputRead: boolean;
  /** The export's end (meter end/finish): its status code (finish only) and the fuel it had left. */
  end?: { code?: number; left: number };
}

/** A host call, worker to server: the arguments and the blocks they name (index, length, bytes). */
export interface HostCallRequest {
  tally: Tally;
  ns: string;
  name: string;
  args: unknown[];
  blocks: Array<[index: number, length: number, bytes: Uint8Array | null]>;
}

/** Its answer: the result, the blocks the host function stored (result names them by placeholder). */
export type HostCallAnswer = { result: unknown; stored: Uint8Array[] } | { error: string };

/** Messages on the worker's own channel (parentPort), both ways. */
export type ToWorker = { type: "call"; fn: string; input: Uint8Array } | { type: "rebuild" };
export type FromWorker =
  | { type: "ready" }
  | { type: "done"; output: Uint8Array | null; tally: Tally }
  | { type: "failed"; name: string; message: string; tally: Tally }
  | { type: "log"; level: "info" | "warn" | "error" | "debug"; source: "log" | "stdout" | "stderr"; message: string };

/** A stored answer's address until the worker stores it: block index 0xFFFF, offset = its rank. */
export const PLACEHOLDER_INDEX = 0xffff;
export const placeholder = (rank: number): bigint => (BigInt(PLACEHOLDER_INDEX) << 48n) | BigInt(rank);
const FIRST_BLOCK = 1n << 48n;

if (parentPort) serve(parentPort, workerData as WorkerStart);

function serve(parent: NonNullable<typeof parentPort>, start: WorkerStart): void {
  const flag = new Int32Array(start.flag);
  const post = (m: FromWorker) => parent.postMessage(m);
  let tally: Tally = { fuel: 0, inputRead: false };
  /** The tally so far, handed over at a crossing, and a fresh one begun. */
  const takeTally = (): Tally => {
    const t = tally;
    tally = { fuel: 0, inputRead: false };
    return t;
  };
  let memory: WebAssembly.Memory | undefined;
  const io = new CallIo(() => memory, start.local.maxOutputBytes, (units) => void (tally.fuel += units));

  const hostCall = (ns: string, name: string) => (ctx: CallContext, ...args: unknown[]) => {
    const blocks: HostCallRequest["blocks"] = [];
    for (const a of args) {
      if (typeof a !== "bigint" || a < FIRST_BLOCK) continue;
      const block = ctx.read(a); // a view of the block, not a copy; null: no block there
      if (!block) continue;
      const bytes = block.bytes();
      blocks.push([Number(a >> 48n), bytes.byteLength, bytes.byteLength <= start.maxShippedBytes ? bytes : null]);
    }
    Atomics.store(flag, 0, 0);
    start.port.postMessage({ tally: takeTally(), ns, name, args, blocks } satisfies HostCallRequest);
    Atomics.wait(flag, 0, 0);
    const answer = receiveMessageOnPort(start.port)?.message as HostCallAnswer | undefined;
    if (!answer) throw new Error(`host function ${name}: no answer from the host`);
    if ("error" in answer) throw new Error(answer.error);
    let { result } = answer;
    answer.stored.forEach((bytes, rank) => {
      const at = ctx.store(bytes);
      if (result === placeholder(rank)) result = at;
    });
    return result;
  };

  const log = (level: "info" | "warn" | "error" | "debug") => (message: string) => post({ type: "log", level, source: "log", message: String(message) });
  const logger = { trace: log("debug"), debug: log("debug"), info: log("info"), log: log("info"), warn: log("warn"), error: log("error") } as unknown as Console;

  // Block copies cost what the server's wrapper charges a host call: HOST_CALL_FUEL plus 1 unit per 16 bytes of the block.
  const copies = blockCopyFunctions(() => memory);
  const charged = (fn: (ctx: CallContext, block: bigint, at: bigint, len: bigint) => bigint) => (ctx: CallContext, block: bigint, at: bigint, len: bigint) => {
    tally.fuel += HOST_CALL_FUEL + Math.floor(Number(ctx.length(block)) / 16);
    return fn(ctx, block, at, len);
  };
  const ended = (left: number, code?: number) => {
    tally.end = { code, left };
    return start.local.kept;
  };
  // WASI calls cost what the server's wrapper charges a host call that names no block.
  const wasi = createWasi({
    memory: () => memory,
    output: (fd, line) => post({ type: "log", level: fd === 1 ? "info" : "warn", source: fd === 1 ? "stdout" : "stderr", message: line }),
  });
  const local: Record<string, Record<string, (ctx: CallContext, ...args: any[]) => unknown>> = {
    [start.local.wasiModule]: Object.fromEntries(
      Object.entries(wasi).map(([name, fn]) => [name, (_ctx: CallContext, ...args: any[]) => ((tally.fuel += HOST_CALL_FUEL), fn(...args))]),
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
