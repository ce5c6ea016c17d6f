// JSON texts handed to SQLite's JSON functions (json_each, json_extract) as statement arguments.
// JSON.stringify writes a lone UTF-16 surrogate (a string cut in the middle of a pair, or built from
// an escape like "\ud800" in a request body or a plugin's output) as that escape, and SQLite decodes
// the escape to bytes that are not UTF-8: the native libSQL driver then aborts the whole process when
// it reads the row back. Lone surrogates become U+FFFD here, as a string bound directly (or encoded
// with TextEncoder) already does.

import { Buffer } from "node:buffer";

// A \uD800-\uDFFF escape whose backslash is not itself escaped (an odd run of backslashes before
// "u"): JSON.stringify writes well-formed pairs as they are, so every such escape is a lone surrogate.
const LONE_SURROGATE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;

/** JSON.stringify(value) with every lone surrogate replaced by U+FFFD. */
export function sqlJson(value: unknown): string {
  const text = JSON.stringify(value);
  // Most texts hold no such escape (JSON.stringify writes lowercase hex): one scan, no regex.
  return text.includes("\\ud") ? text.replace(LONE_SURROGATE_ESCAPE, "$1\\ufffd") : text;
}

/**
 * The longest JSON text handed to the database as one argument, in UTF-8 bytes: a libSQL server
 * refuses a text or blob over ~5,000,000 bytes (its length limit; SQLite's own is 1e9), and a KV
 * commit's writes as one text passed it within a call's limits (1 MiB of control characters is 6 MiB
 * of JSON escapes), failing the whole commit.
 */
export const MAX_TEXT_BYTES = 4_000_000;

/** `items` as sqlJson arrays of at most `maxBytes` UTF-8 bytes each, in order (an item longer than that alone in one). */
export function sqlJsonChunks(items: readonly unknown[], maxBytes = MAX_TEXT_BYTES): string[] {
  const whole = sqlJson(items);
  // Nearly always one text: at most 3 UTF-8 bytes per UTF-16 unit.
  if (whole.length * 3 <= maxBytes || Buffer.byteLength(whole) <= maxBytes) return [whole];
  const out: string[] = [];
  let parts: string[] = [];
  let bytes = 2;
  for (const item of items) {
    const text = sqlJson(item);
    const n = Buffer.byteLength(text) + 1;
    if (parts.length > 0 && bytes + n > maxBytes) {
      out.push(`[${parts.join(",")}]`);
      [parts, bytes] = [[], 2];
    }
    parts.push(text);
    bytes += n;
  }
  if (parts.length > 0) out.push(`[${parts.join(",")}]`);
  return out;
}
