// Strings cross the plugin boundary as Extism memory offsets (u64): read and store helpers.
import type { CallContext } from "@extism/extism";
import { PluginCallError } from "../hooks/failures.ts";

export function readText(ctx: CallContext, offset: bigint, what: string): string {
  const block = ctx.read(offset);
  if (block === null) throw new PluginCallError("trap", `${what}: invalid memory offset ${offset}`);
  return block.text();
}

/** Stores `text` for the plugin and returns its offset; 0 means "nothing". */
export function storeText(ctx: CallContext, text: string | undefined): bigint {
  return text === undefined ? 0n : ctx.store(text);
}
