// Strings cross the plugin boundary as Extism memory offsets (u64): read and store helpers.
import type { CallContext } from "@extism/extism";
import { PluginCallError } from "../hooks/failures.ts";

const decoder = new TextDecoder();

// CallContext.read() wraps a block in a PluginOutput, whose private field is a WeakMap entry: about
// 0.7 us a read (a DataView alone: 0.07), and a small plugin call reads several blocks (its KV key
// and scope, the answer it copies out, the output it writes). The SDK keeps its blocks behind a
// module-private symbol, "get-block" (@extism/extism 2.0.0-rc13): looked up once on the context's
// prototype; read() stays the way where it is missing (a worker's host call: worker-instance.ts).
let known: { proto: object; symbol: symbol | null } | undefined;

function getBlock(ctx: CallContext): symbol | null {
  const proto = Object.getPrototypeOf(ctx) as object;
  if (known?.proto !== proto) known = { proto, symbol: Object.getOwnPropertySymbols(proto).find((s) => s.description === "get-block") ?? null };
  return known.symbol;
}

/** The bytes of the block at `offset` (its whole block, as read() gives it), or null for no block. */
export function blockBytes(ctx: CallContext, offset: bigint): Uint8Array | null {
  const symbol = getBlock(ctx);
  const get = symbol === null ? undefined : (ctx as unknown as Record<symbol, unknown>)[symbol];
  if (typeof get === "function") {
    let buffer: unknown;
    try {
      buffer = (get as (index: number) => { buffer: unknown }).call(ctx, Number(BigInt(offset) >> 48n)).buffer;
    } catch {
      return null; // no block at that index (the SDK throws)
    }
    if (buffer instanceof ArrayBuffer) return new Uint8Array(buffer);
  }
  return ctx.read(offset)?.bytes() ?? null;
}

/** The plugin's block at `offset`; a bad offset fails the call as a trap naming `what`. */
export function readBlock(ctx: CallContext, offset: bigint, what: string): Uint8Array {
  const bytes = blockBytes(ctx, offset);
  if (bytes === null) throw new PluginCallError("trap", `${what}: invalid memory offset ${offset}`);
  return bytes;
}

/**
 * The plugin's block at `offset` as text, refused as a trap before it is decoded when it holds more
 * than `maxBytes`: a 60 MB block handed as a KV value was decoded (and scanned twice) before the
 * 256 KiB value limit refused it, 0.4 s of the host's thread a call.
 */
export function readText(ctx: CallContext, offset: bigint, what: string, maxBytes: number): string {
  // The length first: decoding a block that is refused anyway would hold the thread.
  const length = Number(ctx.length(offset));
  if (length > maxBytes) throw new PluginCallError("trap", `${what}: ${length} bytes, more than the ${maxBytes} it may take`);
  // Refused, not decoded to U+FFFD: keys 0xFF and 0xFE were one key then, and a binary value came
  // back changed (an outside probe).
  try {
    return strict.decode(readBlock(ctx, offset, what));
  } catch (err) {
    if (err instanceof PluginCallError) throw err;
    throw new PluginCallError("trap", `${what}: not UTF-8 text (KV keys, values and arguments are text)`);
  }
}
const strict = new TextDecoder("utf-8", { fatal: true });

/** The first `maxBytes` of the plugin's block at `offset` as text (a character cut at the end decodes as U+FFFD). */
export function readTextHead(ctx: CallContext, offset: bigint, what: string, maxBytes: number): string {
  const bytes = readBlock(ctx, offset, what);
  return decoder.decode(bytes.length > maxBytes ? bytes.subarray(0, maxBytes) : bytes);
}

/** Stores `text` for the plugin and returns its offset; 0 means "nothing". */
export function storeText(ctx: CallContext, text: string | undefined): bigint {
  return text === undefined ? 0n : ctx.store(text);
}
