// redact: an example transform plugin. transform_tool_result masks e-mail addresses and runs of 6 or
// more digits (card, phone and account numbers) in a tool's result before the model sees it;
// transform_llm_output does the same to the answer before it is stored and returned. When nothing
// needs masking it returns nothing, which keeps the text as it is.
import { beginCall, getString, quote, ByteWriter } from "../lib";

const MASK = "[redacted]";

function isDigit(c: i32): bool { return c >= 0x30 && c <= 0x39; }
function isLocal(c: i32): bool {
  return isDigit(c) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2e || c == 0x5f || c == 0x2d || c == 0x2b || c == 0x25;
}
function isDomain(c: i32): bool {
  return isDigit(c) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2e || c == 0x2d;
}

/**
 * Writes `text` into `w` as the inside of a JSON string, every e-mail address and digit run of 6+
 * masked; true when something was. Pieces go straight into one buffer (no `+=`: under the stub
 * runtime nothing is freed during a call, and a string built a character at a time took memory
 * that grew with the square of its length: 2,500 characters ran 64 pages out).
 */
function redactInto(w: ByteWriter, text: string): bool {
  let changed = false;
  let copied = 0; // text[0, copied) is written
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (isDigit(c)) {
      let j = i;
      while (j < n && isDigit(text.charCodeAt(j))) j++;
      if (j - i >= 6) {
        w.escaped(text, copied, i).text(MASK);
        copied = j;
        changed = true;
      }
      i = j;
      continue;
    }
    if (c == 0x40) { // '@': the local part before it (not yet written) and the domain after it
      let start = i;
      while (start > copied && isLocal(text.charCodeAt(start - 1))) start--;
      let j = i + 1;
      while (j < n && isDomain(text.charCodeAt(j))) j++;
      if (start < i && dotInside(text, i + 1, j)) {
        w.escaped(text, copied, start).text(MASK);
        copied = j;
        changed = true;
        i = j;
        continue;
      }
    }
    i++;
  }
  w.escaped(text, copied, n);
  return changed;
}

/** Whether text[s, e) has its first "." after its first character (a domain such as example.com). */
function dotInside(text: string, s: i32, e: i32): bool {
  for (let k = s; k < e; k++) if (text.charCodeAt(k) == 0x2e) return k > s;
  return false;
}

function transform(field: string, key: string): i32 {
  const input = beginCall();
  const text = getString(input, field);
  if (text === null) return 0;
  const w = new ByteWriter(text!.length + 64);
  w.text("{" + quote(key) + ':"');
  if (!redactInto(w, text!)) return 0; // nothing masked: keep the text as it is
  w.text('"}').output();
  return 0;
}

export function transform_tool_result(): i32 { return transform("result", "result"); }
export function transform_llm_output(): i32 { return transform("response", "response"); }
