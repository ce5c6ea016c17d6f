// The messages between the server's thread (worker-instance.ts) and a plugin's worker thread
// (worker-thread.ts), and the conventions both sides keep.
import type { MessagePort } from "node:worker_threads";

export const WORKER_PROTOCOL = "hookbox-plugin-worker/1";

/** A crossing that only settles the tally (its namespace and name). */
export const SETTLE = "";

/** What the server's thread hands the worker at its start. */
export interface WorkerStart {
  /** Marks a plugin worker (worker-thread.ts serves only then). */
  protocol: typeof WORKER_PROTOCOL;
  module: WebAssembly.Module;
  /** The module's host functions, by import module: each becomes a stub here. */
  functions: Record<string, string[]>;
  /** Host calls' answers come back on this port (read synchronously). */
  port: MessagePort;
  /** [0]: set to 1 by the server's thread once an answer is on the port. */
  flag: SharedArrayBuffer;
  /** A block handed to a host function crosses whole up to this many bytes (its length always). */
  maxShippedBytes: number;
  /** Where the functions served here are imported from, and what they need. */
  local: {
    /** The Extism kernel's: its input functions are served here (call-io.ts), the rest by the SDK. */
    kernelModule: string;
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
  /** Log lines the worker dropped (its own rate limit, before they became messages). */
  droppedLogs?: number;
}

/**
 * A host call, worker to server, on the worker's own channel: the arguments and the blocks they
 * name, each once: index, length, and its bytes in the message (a small block), or at `at` in the
 * worker's `scratch` buffer (a large one: Deno's server thread took ~250 ms per MiB to receive one
 * in a message), or neither (beyond what one call may ship: its length alone).
 */
export interface HostCallRequest {
  type: "host";
  /** The worker's count of its crossings: its answer carries the same. */
  id: number;
  tally: Tally;
  ns: string;
  name: string;
  args: unknown[];
  blocks: Array<[index: number, length: number, bytes: Uint8Array | null, at: number]>;
  scratch?: SharedArrayBuffer;
}

/** A block larger than this crosses in the scratch buffer. */
export const INLINE_BLOCK_BYTES = 64 * 1024;

/**
 * Its answer: the result, and where the blocks the host function stored lie in the server's answer
 * buffer (`scratch`, shared; the result names them by placeholder). Bytes in a message were slow to
 * receive on Deno (~170 us for 1 KB), a SharedArrayBuffer's handle is not.
 */
export type HostCallAnswer = { id: number } & (HostCallResult | { error: string });
/** A host function's answer as it ran: its result and the blocks it stored. */
export type HostCallResult = { result: unknown; stored: Array<[at: number, length: number]>; scratch?: SharedArrayBuffer };

/** Messages on the worker's own channel (parentPort), both ways. */
/**
 * A call's input crosses in a SharedArrayBuffer (its first `length` bytes; none when empty), not in
 * the message: Deno's worker messages copy a typed array at ~180 ms a MiB (a 4 MiB input took 650 ms,
 * 3 ms this way; Node 21 ms). The server's thread writes it only before posting the call, and the
 * worker serves it read-only (call-io.ts).
 */
export type ToWorker = { type: "call"; fn: string; input: SharedArrayBuffer | undefined; length: number } | { type: "rebuild" };
export type FromWorker =
  | HostCallRequest
  | { type: "ready" }
  | { type: "done"; output: Uint8Array | string | null; tally: Tally }
  | { type: "failed"; name: string; message: string; tally: Tally }
  | { type: "log"; level: "info" | "warn" | "error" | "debug"; source: "log" | "stdout" | "stderr"; message: string };

/** A stored answer's address until the worker stores it: block index 0xFFFF, offset = its rank. */
export const PLACEHOLDER_INDEX = 0xffff;
export const placeholder = (rank: number): bigint => (BigInt(PLACEHOLDER_INDEX) << 48n) | BigInt(rank);
/** The rank a placeholder address names. */
export const placeholderRank = (address: bigint): number => Number(address & ((1n << 48n) - 1n));

/**
 * Blocks laid out one after another in a SharedArrayBuffer for one crossing (a host call's large
 * blocks, an answer's blocks), read by the other side while the sender waits; reused from crossing
 * to crossing and grown, up to `cap` bytes, when one needs more.
 */
export class SharedArea {
  private bytes = new Uint8Array(new SharedArrayBuffer(0));
  private used = 0;

  constructor(private readonly cap = Infinity) {}

  /** Starts a crossing's layout. */
  reset(): void {
    this.used = 0;
  }

  /** Copies `block` in after what this crossing put: its offset, or -1 when it would pass the cap. */
  put(block: Uint8Array): number {
    const at = this.used;
    const end = at + block.byteLength;
    if (end > this.cap) return -1;
    if (end > this.bytes.byteLength) {
      const grown = new Uint8Array(new SharedArrayBuffer(Math.min(this.cap, Math.max(end, 2 * this.bytes.byteLength))));
      grown.set(this.bytes.subarray(0, at));
      this.bytes = grown;
    }
    this.bytes.set(block, at);
    this.used = end;
    return at;
  }

  /** The buffer to send with this crossing, when it put anything. */
  get buffer(): SharedArrayBuffer | undefined {
    return this.used > 0 ? this.bytes.buffer : undefined;
  }
}
