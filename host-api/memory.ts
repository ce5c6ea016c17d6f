// Strings cross the plugin boundary as Extism memory offsets (u64): read and store helpers.
import type { CallContext } from "@extism/extism";
import { PluginCallError } from "../hooks/failures.ts";

/** The plugin's block at `offset`; a bad offset fails the call as a trap naming `what`. */
export function readBlock(ctx: CallContext, offset: bigint, what: string): NonNullable<ReturnType<CallContext["read"]>> {
  const block = ctx.read(offset);
  if (block === null) throw new PluginCallError("trap", `${what}: invalid memory offset ${offset}`);
  return block;
}

export function readText(ctx: CallContext, offset: bigint, what: string): string {
  return readBlock(ctx, offset, what).text();
}

/** Stores `text` for the plugin and returns its offset; 0 means "nothing". */
export function storeText(ctx: CallContext, text: string | undefined): bigint {
  return text === undefined ? 0n : ctx.store(text);
}
