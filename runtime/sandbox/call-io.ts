// The call's input and output over one instance's linear memory: hookbox_input_read copies the input
// in and hookbox_output_write copies the output out, one host call each; the kernel's input
// functions read the same bytes. Served where the memory is: by the sandbox for an in-thread
// instance, by the worker thread for one that runs there (worker-thread.ts).
import type { CallContext } from "@extism/extism";
import { offsetInBlock } from "./block-copy.ts";
import { HOST_CALL_FUEL } from "./fuel.ts";

const decoder = new TextDecoder();
const NO_INPUT = new DataView(new ArrayBuffer(0));

export class CallIo {
  /** The running call's input (undefined between calls: then both functions decline). */
  input: Uint8Array | undefined;
  /** The running call's output as text, when the plugin set it through hookbox_output_write. */
  output: string | undefined;
  /** The running call has called hookbox_input_read (lib's beginCall()). */
  inputRead = false;
  /** A view of the whole linear memory, made again for a new memory or when a memory.grow replaced its buffer. */
  private view = new Uint8Array(0);
  /** The input for the kernel's loads, made at the call's first load. */
  private inputView: DataView | undefined;
  /** The input as a kernel block of the call's own, made at the call's first input_offset. */
  private inputBlock: bigint | undefined;

  constructor(
    private readonly memory: () => WebAssembly.Memory | undefined,
    private readonly maxOutputBytes: number,
    /** Charges fuel (may throw: out of fuel, past the deadline). */
    private readonly charge: (units: number) => void,
  ) {}

  /**
   * `input` may be shared with other instances' calls (one emit's payload): nothing here writes to
   * it, and a plugin only ever gets a copy it can change (its memory, its own input block).
   */
  begin(input: Uint8Array): void {
    this.input = input;
    this.output = undefined;
    this.inputRead = false;
    this.inputView = undefined;
    this.inputBlock = undefined;
  }

  end(): void {
    this.input = undefined;
    this.output = undefined;
    this.inputView = undefined;
    this.inputBlock = undefined;
  }

  /**
   * The kernel's input functions (extism:host/env), served from the call's input instead of a
   * kernel block: the block, a private copy of the input per call, was the one allocation every
   * call made, and a plugin that reads its input through input_length and input_load_u64 (the
   * Rust, Go and C PDKs) or hookbox_input_read never needs it. A load past the input traps. Only
   * input_offset, which hands out a block the plugin may write to, makes one, once per call.
   */
  kernelFunctions(): Record<string, (ctx: CallContext, ...args: any[]) => unknown> {
    return {
      input_length: () => BigInt(this.input?.byteLength ?? 0),
      input_load_u8: (_ctx: CallContext, at: bigint) => this.loads().getUint8(offsetInBlock(at)),
      input_load_u64: (_ctx: CallContext, at: bigint) => this.loads().getBigUint64(offsetInBlock(at), true),
      input_offset: (ctx: CallContext) => {
        if (!this.input) return 0n;
        return (this.inputBlock ??= ctx.store(this.input.slice()));
      },
    };
  }

  private loads(): DataView {
    const { input } = this;
    return (this.inputView ??= input ? new DataView(input.buffer, input.byteOffset, input.byteLength) : NO_INPUT);
  }

  /** The view, fresh, when `len` bytes at `at` lie inside linear memory; else undefined (no memory here, bad range). */
  private viewOver(at: number, len: number): Uint8Array | undefined {
    const memory = this.memory();
    if (!memory) return undefined;
    if (this.view.buffer !== memory.buffer) this.view = new Uint8Array(memory.buffer);
    return at >= 0 && len >= 0 && at + len <= this.view.byteLength ? this.view : undefined;
  }

  // Extism's kernel hands the input over 8 bytes per host call (a BigInt each way): a 300 KB
  // on_session_delete payload (10k ids) took ~37k calls per plugin and dominated a bulk delete.
  /** `hookbox_input_read(dest, len)`: the whole input at `dest`; `len`, or 0 when it cannot (the plugin falls back to the kernel). */
  readInput(dest: bigint, len: bigint): bigint {
    // Charged by the bytes it copies, like a block copy: eight reads of a 4 MiB input into fresh
    // memory were ~80 ms of copying between two clock checks at a flat price.
    this.charge(HOST_CALL_FUEL + Math.floor((this.input?.byteLength ?? 0) / 16));
    this.inputRead = true;
    const { input } = this;
    const at = Number(dest);
    const view = input && len === BigInt(input.byteLength) ? this.viewOver(at, input.byteLength) : undefined;
    if (!view) return 0n;
    view.set(input!, at);
    return len;
  }

  /**
   * `hookbox_output_write(src, len)`: `len` bytes at `src` become the output; `len`, or 0 (then
   * output_set's counts). Decoded here, straight from linear memory: a copy of the bytes first
   * would be an allocation per call for text the caller wants anyway.
   */
  writeOutput(src: bigint, len: bigint): bigint {
    this.charge(HOST_CALL_FUEL);
    this.output = undefined; // declined below: the plugin falls back to output_set, which then counts
    const at = Number(src);
    const n = Number(len);
    const view = this.input && n <= this.maxOutputBytes ? this.viewOver(at, n) : undefined;
    if (!view) return 0n;
    this.charge(Math.floor(n / 16));
    this.output = decoder.decode(view.subarray(at, at + n));
    return len;
  }
}
