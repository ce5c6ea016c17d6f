// Test fixture: each command fails in one way whose cause the host must name.
import { beginCall, getString, outputString, quote } from "../../lib";

export function command_throw(): i32 {
  const input = beginCall();
  const why = getString(input, "raw_args");
  throw new Error(why === null ? "no reason" : why);
}

export function command_rc(): i32 {
  beginCall();
  return 7;
}

export function command_nobegin(): i32 {
  outputString(quote("forgot beginCall"));
  return 0;
}

export function command_ok(): i32 {
  beginCall();
  outputString(quote("fine"));
  return 0;
}

/** Its raw_args as its whole output, unquoted; "deep N": N nested arrays (a stack-depth probe). */
export function command_echo(): i32 {
  const input = beginCall();
  const text = getString(input, "raw_args");
  if (text !== null && text.startsWith("deep ")) {
    const n = I32.parseInt(text.slice(5));
    outputString("[".repeat(n) + "]".repeat(n));
  } else outputString(text === null ? "" : text);
  return 0;
}
