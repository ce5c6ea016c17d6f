// hookbox_input_read / hookbox_output_write over one instance's linear memory: the call's input
// copied in and its output copied out in one host call each. Served where the memory is: by the
// sandbox for an in-thread instance, by the worker thread for one that runs there (worker-thread.ts).
import { HOST_CALL_FUEL } from "./fuel.ts";

export class CallIo {
  /** The running call's input (undefined between calls: then both functions decline). */
  input: Uint8Array | undefined;
  /** The running call's output, when the plugin set it through hookbox_output_write. */
  output: Uint8Array | undefined;
  /** The running call has called hookbox_input_read (lib's beginCall()). */
  inputRead = false;
  /** A view of the whole linear memory, made again for a new memory or when a memory.grow replaced its buffer. */
  private view = new Uint8Array(0);

  constructor(
    private readonly memory: () => WebAssembly.Memory | undefined,
    private readonly maxOutputBytes: number,
    /** Charges fuel (may throw: out of fuel, past the deadline). */
    private readonly charge: (units: number) => void,
  ) {}

  begin(input: Uint8Array): void {
    this.input = input;
    this.output = undefined;
    this.inputRead = false;
  }

  end(): void {
    this.input = undefined;
    this.output = undefined;
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
    this.charge(HOST_CALL_FUEL);
    this.inputRead = true;
    const { input } = this;
    const at = Number(dest);
    const view = input && len === BigInt(input.byteLength) ? this.viewOver(at, input.byteLength) : undefined;
    if (!view) return 0n;
    view.set(input!, at);
    return len;
  }

  /** `hookbox_output_write(src, len)`: `len` bytes at `src` become the output; `len`, or 0 (then output_set's counts). */
  writeOutput(src: bigint, len: bigint): bigint {
    this.charge(HOST_CALL_FUEL);
    this.output = undefined; // declined below: the plugin falls back to output_set, which then counts
    const at = Number(src);
    const n = Number(len);
    const view = this.input && n <= this.maxOutputBytes ? this.viewOver(at, n) : undefined;
    if (!view) return 0n;
    this.charge(Math.floor(n / 16));
    this.output = view.slice(at, at + n);
    return len;
  }
}
