// The host functions an instance imports, as the sandbox hands them over: each refuses to run for an
// abandoned instance (one built before the live one: `generation`), charges fuel (HOST_CALL_FUEL
// plus the size of the blocks it is handed and answers with), checks the clock, and leaves what it
// failed with as the call's failure. An async one stays async (Extism tells them by constructor)
// and is failed at once when its instance is abandoned.
import type { CallContext } from "@extism/extism";
import { PluginCallError } from "../../hooks/failures.ts";
import type { HostFunction } from "../../host-api/binding.ts";
import { FIRST_BLOCK, hostCallCost, type FuelMeter } from "./fuel.ts";

export const isAsync = (fn: HostFunction) => fn.constructor.name === "AsyncFunction";

export class HostCalls {
  /** The live instance's generation. */
  generation = 0;
  /** The running call has called an async host function (its effect, e.g. a request, is out). */
  awaited = false;
  /**
   * What a host function of the running call failed with: the call's failure whatever reaches the
   * caller (an error thrown through a suspended or worker call may arrive as another).
   */
  failure: PluginCallError | undefined;
  /** Rejects of the async host calls in flight: a discarded instance fails them at once. */
  private readonly pending = new Set<(err: Error) => void>();

  /** `inWorker`: the live instance runs in a worker (a block it answers with is not in this thread's memory). */
  constructor(
    private readonly meter: FuelMeter,
    private readonly inWorker: () => boolean,
  ) {}

  /** A call starts: nothing awaited, nothing failed yet. */
  beginCall(): void {
    this.awaited = false;
    this.failure = undefined;
  }

  /** Host functions of an abandoned instance refuse to run. */
  assertLive(generation: number): void {
    if (generation !== this.generation) throw new PluginCallError("unavailable", "host call from an abandoned instance");
  }

  /** The live instance is dropped: a new generation, and its async host calls in flight fail now. */
  abandon(): void {
    this.generation++;
    const abandoned = new PluginCallError("unavailable", "host call of an abandoned call");
    for (const reject of this.pending) reject(abandoned);
    this.pending.clear();
  }

  /**
   * `fns` for the instance of `generation`: `awaited` names the async ones (beside those Extism
   * tells), `blockAnswers` those answering with a block; `cheap` ones only copy memory (charged by
   * their bytes) and check the clock only now and then.
   */
  wrapAll(
    fns: Record<string, HostFunction>,
    generation: number,
    awaited: ReadonlySet<string> | undefined,
    blockAnswers: ReadonlySet<string> | undefined,
    cheap: ReadonlySet<HostFunction>,
  ): Record<string, HostFunction> {
    return Object.fromEntries(
      Object.entries(fns).map(([name, fn]) => [name, this.wrap(fn, generation, awaited?.has(name) ?? false, blockAnswers?.has(name) ?? false, cheap.has(fn))]),
    );
  }

  private wrap(fn: HostFunction, generation: number, awaited: boolean, answersBlock: boolean, cheap: boolean): HostFunction {
    // A host API function is a clock check before it runs (it may read the database or start a
    // request); a block copy (memory work) only now and then (FuelMeter.charge).
    const charge = (ctx: CallContext, args: unknown[]) => {
      this.assertLive(generation);
      this.meter.charge(hostCallCost(ctx, args), !cheap);
    };
    // A block the function made for its answer is charged and counted too (see FuelMeter.chargeAnswer).
    const answered = (ctx: CallContext, result: unknown) => {
      if (answersBlock && typeof result === "bigint" && result >= FIRST_BLOCK) this.meter.chargeAnswer(Number(ctx.length(result)), this.inWorker() ? undefined : result);
      return result;
    };
    const failed = (err: unknown) => {
      if (err instanceof PluginCallError) this.failure ??= err;
      return err;
    };
    if (awaited || isAsync(fn)) {
      const hostCall = async (ctx: CallContext, args: unknown[]) => {
        charge(ctx, args);
        this.awaited = true;
        // The call may be abandoned meanwhile (its worker terminated): then this host call fails at
        // once, so Extism drops it; an answer handed to it later would wait forever for the dead
        // worker to take it.
        // (A race against one long-lived promise would add a reaction to it per host call, never
        // removed: memory and time grew with every call.)
        const suspended = performance.now();
        let result: unknown;
        try {
          const answer = fn(ctx, ...args) as Promise<unknown>;
          result = await new Promise((resolve, reject) => {
            this.pending.add(reject);
            answer.then(resolve, reject).finally(() => this.pending.delete(reject));
          });
        } finally {
          // In-thread (CAN_SUSPEND) the thread was free while this awaited, answered or failed: not
          // part of the slice, nor of the work that calls for a turn of the event loop.
          this.meter.extendSlice(performance.now() - suspended);
        }
        if (generation !== this.generation) throw new PluginCallError("unavailable", "host call answered after its call was abandoned");
        return answered(ctx, result);
      };
      // Stays an async function: Extism tells async host functions by their constructor.
      return async (ctx: CallContext, ...args: any[]) => {
        try {
          return await hostCall(ctx, args);
        } catch (err) {
          throw failed(err);
        }
      };
    }
    return (ctx: CallContext, ...args: any[]) => {
      try {
        charge(ctx, args);
        return answered(ctx, fn(ctx, ...args));
      } catch (err) {
        throw failed(err);
      }
    };
  }
}
