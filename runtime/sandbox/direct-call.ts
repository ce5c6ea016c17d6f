// Calls an export of an in-thread Extism instance synchronously. The SDK's own call() takes the same
// steps (drop the kernel's blocks, push a call frame, run the export, pop the frame, read the output
// or error block; it also stores the input as a block, which the sandbox's kernel input functions
// make unneeded: call-io.ts) inside two async functions: on a small plugin that
// was a third of a raw Extism call (0.6 of 1.8 us), and it made every plugin call a promise, so a
// fan-out to in-thread plugins awaited each one. The steps are the SDK's methods, keyed by symbols on
// its CallContext and found by their descriptions; the SDK is pinned to one version, and where they
// are not all there (another version) the sandbox keeps using call().
import type { CallContext } from "@extism/extism";
import { errorText } from "./call-failure.ts";
import type { Rewinder } from "./rewind.ts";

/** The CallContext methods ForegroundPlugin.call uses, by their symbols' descriptions. */
const STEPS = ["reset", "begin", "end", "get-block"] as const;

interface Steps {
  reset(): void;
  /** Pushes a call frame; its input block (none here) is what the SDK's own input functions read. */
  begin(input: number | null): void;
  /** [error block, output block] of the frame it pops. */
  end(): [number | null, number | null];
  block(index: number): { buffer: ArrayBufferLike };
}

export interface DirectCaller {
  /**
   * Runs export `fn` in a fresh call frame (the input is the sandbox's: call-io.ts). Returns the
   * output block's bytes (undefined for none); throws what the export threw, or an Error
   * "Plugin-originated error: ..." for error_set.
   */
  call(fn: string): Uint8Array | undefined;
  /**
   * The same for an instance with async (Suspending) host functions, where the runtime has JSPI:
   * the export runs through WebAssembly.promising, made once per export (the SDK makes one per
   * call: about 5 us on Deno, and its call() adds two async functions on top).
   */
  callSuspending(fn: string): Promise<Uint8Array | undefined>;
  /**
   * The same for an instance of a rewindable module (rewind.ts, where the runtime has no JSPI): the
   * export is called again, rewinding, each time it unwound for an async host function.
   */
  callRewinding(fn: string, rewinder: Rewinder): Promise<Uint8Array | undefined>;
}

function stepsOf(ctx: CallContext): Steps | undefined {
  const proto = Object.getPrototypeOf(ctx) as object;
  const found = new Map(Object.getOwnPropertySymbols(proto).map((s) => [s.description, s]));
  if (!STEPS.every((name) => found.has(name))) return undefined;
  const c = ctx as unknown as Record<symbol, (...args: any[]) => any>;
  const [reset, begin, end, block] = STEPS.map((name) => c[found.get(name)!]!.bind(ctx));
  return { reset: reset!, begin: begin!, end: end!, block: block! };
}

/**
 * A synchronous caller for the instance whose kernel is `ctx` (the context Extism hands every host
 * function), or undefined when this SDK's CallContext lacks the steps.
 */
export function directCaller(ctx: CallContext, exports: WebAssembly.Exports): DirectCaller | undefined {
  const s = stepsOf(ctx);
  if (!s) return undefined;
  const exported = (fn: string): Function => {
    const func = exports[fn];
    if (typeof func !== "function") throw new Error(`Plugin error: function "${fn}" does not exist`);
    return func;
  };
  const enter = () => {
    s.reset();
    s.begin(null);
  };
  const output = ([error, output]: [number | null, number | null]): Uint8Array | undefined => {
    if (error !== null) throw new Error(`Plugin-originated error: ${errorText(new Uint8Array(s.block(error).buffer))}`);
    return output === null ? undefined : new Uint8Array(s.block(output).buffer);
  };
  const promising = new Map<string, () => Promise<unknown>>();
  return {
    call(fn) {
      const func = exported(fn);
      enter();
      let blocks: [number | null, number | null];
      try {
        func();
      } finally {
        blocks = s.end();
      }
      return output(blocks);
    },
    async callSuspending(fn) {
      let run = promising.get(fn);
      if (!run) promising.set(fn, (run = (WebAssembly as unknown as { promising(f: Function): () => Promise<unknown> }).promising(exported(fn))));
      enter();
      let blocks: [number | null, number | null];
      try {
        await run();
      } finally {
        blocks = s.end();
      }
      return output(blocks);
    },
    async callRewinding(fn, rewinder) {
      const func = exported(fn);
      enter();
      rewinder.begin();
      let blocks: [number | null, number | null];
      try {
        func();
        for (let answer = rewinder.unwound(); answer; answer = rewinder.unwound()) {
          await answer;
          rewinder.rewind();
          func();
        }
      } catch (err) {
        throw rewinder.explain(err);
      } finally {
        rewinder.end();
        blocks = s.end();
      }
      return output(blocks);
    },
  };
}
