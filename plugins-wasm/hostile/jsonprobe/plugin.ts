// Test fixture for lib/json.ts (called directly by test/plugins-build.test.ts, not via hooks).
// Input: "<path>\n<json>", where path is dotted ("source.user_id"); output: the value found, as
// JSON (null when absent), so the test can compare with JSON.parse of the same document.
import {
  beginCall, decodeString, getNumber, getObject, getRaw, getStringArray, findField, outputString, quote,
  quoteArray,
} from "../../lib";

class Query {
  constructor(public buf: Uint8Array, public obj: i32, public key: string) {}
}

/** Splits the input and walks every path segment but the last; obj < 0 when a parent is missing. */
function query(): Query {
  const buf = beginCall();
  let nl = 0;
  while (nl < buf.length && buf[nl] != 0x0a) nl++;
  const path = String.UTF8.decodeUnsafe(buf.dataStart, <usize>nl).split(".");
  let obj = nl + 1;
  for (let i = 0; i < path.length - 1 && obj >= 0; i++) obj = getObject(buf, path[i], obj);
  return new Query(buf, obj, path[path.length - 1]);
}

export function get_string(): i32 {
  const q = query();
  let s: string | null = null;
  if (q.obj >= 0) s = decodeString(q.buf, findField(q.buf, q.key, q.obj));
  outputString(s === null ? "null" : quote(s!));
  return 0;
}

export function get_number(): i32 {
  const q = query();
  const n = q.obj < 0 ? NaN : getNumber(q.buf, q.key, NaN, q.obj);
  outputString(isNaN(n) ? "null" : n.toString());
  return 0;
}

export function get_string_array(): i32 {
  const q = query();
  let a: string[] | null = null;
  if (q.obj >= 0) a = getStringArray(q.buf, q.key, q.obj);
  outputString(a === null ? "null" : quoteArray(a!));
  return 0;
}

export function get_raw(): i32 {
  const q = query();
  let r: string | null = null;
  if (q.obj >= 0) r = getRaw(q.buf, q.key, q.obj);
  outputString(r === null ? "null" : quote(r!));
  return 0;
}

/** The whole input as a JSON string literal: UTF-8 in, UTF-16 inside, escaped UTF-8 out. */
export function quote_input(): i32 {
  const buf = beginCall();
  outputString(quote(String.UTF8.decodeUnsafe(buf.dataStart, <usize>buf.length)));
  return 0;
}
