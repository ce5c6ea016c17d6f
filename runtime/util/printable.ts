// Text for a terminal or a log line: characters that act on a terminal or reorder what follows
// (C0 and C1 controls, DEL, the line and paragraph separators, the bidirectional marks, overrides
// and isolates) as their \uXXXX escapes. Raw, a plugin's ESC sequences cleared the screen or set the
// clipboard, and a newline forged an output line (an outside probe).
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

/** `text` for one line (or, with `keepLines`, several: newlines and tabs stay), each such character escaped. */
export const printable = (text: string, keepLines = false): string =>
  text.replace(UNPRINTABLE, (c) => (keepLines && (c === "\n" || c === "\t") ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`));
