// text-stats: an example plugin tool. The manifest declares `text_stats` with the JSON Schema of its
// arguments; the host checks the arguments against it before this export runs, so `text` is a
// string here. Input: {args, session_id, turn_id, tool_call_id}. Output: the result as JSON.
import { beginCall, getString, outputString, ToolPayload } from "../lib";

export function tool_text_stats(): i32 {
  const args = new ToolPayload(beginCall()).args;
  const found = getString(args.buf, "text", args.at);
  if (found === null) {
    outputString('"error: text is missing"');
    return 0;
  }
  const text = found!;
  let words = 0;
  let lines = text.length > 0 ? 1 : 0;
  let chars = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff) continue; // second half of a surrogate pair: one code point
    chars++;
    if (c == 0x0a) lines++;
    const space = c == 0x20 || c == 0x0a || c == 0x09 || c == 0x0d;
    if (!space && !inWord) words++;
    inWord = !space;
  }
  outputString('{"words":' + words.toString() + ',"lines":' + lines.toString() + ',"chars":' + chars.toString() + "}");
  return 0;
}
