// What a failed plugin call tells its caller: any failure as a typed PluginCallError whose message
// (often the plugin's own words: error_set, abort) is bounded before it is stored and served.
import type { CallContext } from "@extism/extism";
import { PluginCallError } from "../../hooks/failures.ts";
import { WasiExit } from "../../host-api/wasi.ts";
import { storedText } from "../sessions/stored-text.ts";
import type { FuelMeter } from "./fuel.ts";

/** Longest failure message kept. */
export const MAX_ERROR_CHARS = 1_000;
/**
 * Most bytes of a plugin's own failure text (error_set, hookbox_abort) decoded: that many characters
 * of UTF-8 and one more, so a longer text still shows it was cut. Decoded whole, an outside probe's
 * 16 MB error_set held the server's thread 100-180 ms per failed call, in-thread or from a worker.
 */
const MAX_ERROR_BYTES = 4 * (MAX_ERROR_CHARS + 1);
const decoder = new TextDecoder();

/** A plugin's failure text from its bytes in a block, bounded (MAX_ERROR_BYTES). */
export function errorText(bytes: Uint8Array): string {
  return decoder.decode(bytes.subarray(0, MAX_ERROR_BYTES));
}

/** What the sandbox knows of the call that failed. */
export interface FailedCall {
  name: string;
  /** The sandbox was closed under the call (shutdown, reload, disable). */
  closed: boolean;
  /** What a host function of the call failed with: the call's failure, whatever reached the caller. */
  hostFailure: PluginCallError | undefined;
  meter: Pick<FuelMeter, "memoryRefused" | "memoryError">;
}

export function callFailure(err: unknown, call: FailedCall): PluginCallError {
  const e = kindOf(err, call);
  // A NUL would cut the stored text (a quarantine reason) short on the embedded file: U+FFFD, as in messages.
  const message = storedText(e.message);
  if (message.length > MAX_ERROR_CHARS) return new PluginCallError(e.kind, `${message.slice(0, MAX_ERROR_CHARS)}… (truncated)`);
  return message === e.message ? e : new PluginCallError(e.kind, message);
}

function kindOf(err: unknown, call: FailedCall): PluginCallError {
  if (err instanceof PluginCallError) return err;
  if (call.hostFailure) return call.hostFailure;
  // Its worker was terminated or its instance dropped by the host, not by anything the plugin did.
  if (call.closed) return new PluginCallError("unavailable", `${call.name} was closed while the call ran (shutdown, reload or disable)`);
  if (err instanceof WasiExit) return new PluginCallError("trap", err.message);
  if (call.meter.memoryRefused) return call.meter.memoryError();
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof RangeError && /call stack/i.test(message)) return new PluginCallError("trap", "stack overflow");
  return new PluginCallError("trap", message.replace(/^Plugin-originated error: /, "plugin error: "));
}

/** hookbox_abort(message): unwinds the plugin's call with its own words. */
export function abort(ctx: CallContext, message: bigint): never {
  const block = ctx.read(message); // a view of the block, not a copy
  const text = block ? errorText(block.bytes()) : "(unreadable message)";
  throw new PluginCallError("trap", text); // cut, saying so, by callFailure
}
