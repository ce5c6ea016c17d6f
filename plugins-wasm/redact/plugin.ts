// redact: an example transform plugin. transform_tool_result masks e-mail addresses and runs of 6 or
// more digits (card, phone and account numbers) in a tool's result before the model sees it;
// transform_llm_output does the same to the answer before it is stored and returned. When nothing
// needs masking it returns nothing, which keeps the text as it is.
import { beginCall, getString, outputString, quote } from "../lib";

const MASK = "[redacted]";

function isDigit(c: i32): bool { return c >= 0x30 && c <= 0x39; }
function isLocal(c: i32): bool {
  return isDigit(c) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2e || c == 0x5f || c == 0x2d || c == 0x2b || c == 0x25;
}
function isDomain(c: i32): bool {
  return isDigit(c) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2e || c == 0x2d;
}

/** `text` with every e-mail address and digit run of 6+ masked; null when nothing changed. */
function redact(text: string): string | null {
  let out = "";
  let changed = false;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (isDigit(c)) {
      let j = i;
      while (j < n && isDigit(text.charCodeAt(j))) j++;
      if (j - i >= 6) {
        out += MASK;
        changed = true;
      } else out += text.substring(i, j);
      i = j;
      continue;
    }
    if (c == 0x40) { // '@': mask the local part already copied and the domain after it
      let start = out.length;
      while (start > 0 && isLocal(out.charCodeAt(start - 1))) start--;
      let j = i + 1;
      while (j < n && isDomain(text.charCodeAt(j))) j++;
      const domain = text.substring(i + 1, j);
      if (start < out.length && domain.indexOf(".") > 0) {
        out = out.substring(0, start) + MASK;
        changed = true;
        i = j;
        continue;
      }
    }
    out += String.fromCharCode(c);
    i++;
  }
  return changed ? out : null;
}

function transform(field: string, key: string): i32 {
  const input = beginCall();
  const text = getString(input, field);
  if (text === null) return 0;
  const masked = redact(text!);
  if (masked !== null) outputString("{" + quote(key) + ":" + quote(masked!) + "}");
  return 0;
}

export function transform_tool_result(): i32 { return transform("result", "result"); }
export function transform_llm_output(): i32 { return transform("response", "response"); }
