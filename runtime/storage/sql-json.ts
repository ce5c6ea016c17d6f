// JSON texts handed to SQLite's JSON functions (json_each, json_extract) as statement arguments.
// JSON.stringify writes a lone UTF-16 surrogate (a string cut in the middle of a pair, or built from
// an escape like "\ud800" in a request body or a plugin's output) as that escape, and SQLite decodes
// the escape to bytes that are not UTF-8: the native libSQL driver then aborts the whole process when
// it reads the row back. Lone surrogates become U+FFFD here, as a string bound directly (or encoded
// with TextEncoder) already does.

// A \uD800-\uDFFF escape whose backslash is not itself escaped (an odd run of backslashes before
// "u"): JSON.stringify writes well-formed pairs as they are, so every such escape is a lone surrogate.
const LONE_SURROGATE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;

/** JSON.stringify(value) with every lone surrogate replaced by U+FFFD. */
export function sqlJson(value: unknown): string {
  const text = JSON.stringify(value);
  // Most texts hold no such escape (JSON.stringify writes lowercase hex): one scan, no regex.
  return text.includes("\\ud") ? text.replace(LONE_SURROGATE_ESCAPE, "$1\\ufffd") : text;
}
