// What a sandbox needs from the host API for one plugin: its host functions and per-call hooks.
// Defined here (host-api), implemented by bindHostApi, consumed by runtime/sandbox.
import type { CallContext } from "@extism/extism";
import type { LogLevel } from "../hooks/logger.ts";

/** Where a plugin's log line came from: hookbox_log, its WASI stdout/stderr, or a failed call. */
export type PluginLogSource = "log" | "stdout" | "stderr" | "failure";

export type HostFunction = (ctx: CallContext, ...args: any[]) => unknown;

/** What a call needs from the host API: its functions and per-call transaction hooks (KV writes). */
export interface HostBinding {
  readonly functions: Record<string, HostFunction>;
  /**
   * The functions that may answer with a promise (hookbox_http when http: is granted). The sandbox
   * awaits them: in-thread, suspended, where the runtime can (sandbox CAN_SUSPEND), else in a worker.
   */
  readonly asyncFunctions?: ReadonlySet<string>;
  /**
   * The functions that answer with a block they make (a KV value, a key list, messages, a fetched
   * body): the sandbox charges those blocks and counts them towards the call's memory allowance.
   * Named, not guessed from the answer: a number such as a counter may look like a block address.
   */
  readonly blockAnswers?: ReadonlySet<string>;
  /** A call that must finish by `deadline` (epoch ms) begins. */
  begin(deadline: number): void;
  /**
   * The call ended; commit its buffered writes only when `ok`. A returned promise must settle before
   * the call counts as done: it rejects (e.g. `conflict`) when the writes could not be committed.
   */
  end(ok: boolean): Promise<void> | undefined | void;
  /** A line for the plugin's log (its WASI stdout/stderr); absent: dropped. */
  log?(level: LogLevel, source: PluginLogSource, message: string): void;
}

