// Hostile: fills its own KV namespace with long keys (as many as its quota lets it: 100,000 keys of
// ~500 bytes is 50 MB) and then asks for host work proportional to them in ONE host call, which runs
// on the server's thread: a list of every key, and a counted sweep after an earlier sweep of the same
// call. Both must stay bounded: the list is refused before any key is read when the answer could not
// fit the plugin's memory, and the sweep is counted in the database, not by reading the keys.
import { beginCall, getString, kvDeleteSessions, kvListBytes, kvSet, outputString, storeRaw, storeString, GLOBAL, KEY_STARTS_PREFIX_ID } from "../../lib";

// @ts-ignore: decorator
@external("extism:host/user", "hookbox_kv_set")
declare function hookbox_kv_set(session: u64, key: u64, value: u64): void;

/** Sets key "k" + byte `b` (not UTF-8 past 0x7f) to the value "v" + byte `b`, through the raw host function. */
function setBinary(b: u8): void {
  const bytes = new Uint8Array(2);
  bytes[0] = 0x6b; // k
  bytes[1] = b;
  const key = storeRaw(bytes.dataStart, 2);
  hookbox_kv_set(0, key, storeString("v"));
}

const PREFIX = "f:";

function id(i: i32): string {
  let s = i.toString();
  while (s.length < 6) s = "0" + s;
  return s;
}

/** The ids [0, n) as a JSON array, written byte by byte (no string per id: the heap is a bump allocator). */
function idsJson(n: i32): Uint8Array {
  const out = new Uint8Array(2 + n * 9);
  let at = 0;
  out[at++] = 0x5b; // [
  for (let i = 0; i < n; i++) {
    if (i > 0) out[at++] = 0x2c; // ,
    out[at++] = 0x22; // "
    let v = i;
    for (let d = 5; d >= 0; d--) {
      out[at + d] = <u8>(0x30 + (v % 10));
      v /= 10;
    }
    at += 6;
    out[at++] = 0x22;
  }
  out[at++] = 0x5d; // ]
  return out.subarray(0, at);
}

/**
 * `/kvflood fill FROM COUNT LEN`: keys "f:" + id + ":" + LEN x's for the ids [FROM, FROM + COUNT);
 * `/kvflood list`: the byte length of the key list under "f:";
 * `/kvflood sweep N`: a counted sweep of id 0, then one of the ids [0, N): both counts, as [a, b];
 * `/kvflood binary N`: sets a key whose second byte is N (0x80 and up is no UTF-8).
 */
export function command_kvflood(): i32 {
  const input = beginCall();
  const raw = getString(input, "raw_args");
  const args = (raw === null ? "" : raw).split(" ");
  if (args[0] == "fill") {
    const from = I32.parseInt(args[1]);
    const count = I32.parseInt(args[2]);
    const tail = ":" + "x".repeat(I32.parseInt(args[3]));
    for (let i = from; i < from + count; i++) kvSet(GLOBAL, PREFIX + id(i) + tail, "v");
    outputString(count.toString());
  } else if (args[0] == "list") {
    outputString(kvListBytes(GLOBAL, PREFIX).length.toString());
  } else if (args[0] == "sweep") {
    const one = idsJson(1);
    const all = idsJson(I32.parseInt(args[1]));
    const first = kvDeleteSessions(GLOBAL, PREFIX, one, 0, one.length, KEY_STARTS_PREFIX_ID);
    const second = kvDeleteSessions(GLOBAL, PREFIX, all, 0, all.length, KEY_STARTS_PREFIX_ID);
    outputString("[" + first.toString() + "," + second.toString() + "]");
  } else if (args[0] == "binary") {
    setBinary(<u8>I32.parseInt(args[1]));
    outputString('"set"');
  } else {
    outputString('"usage: fill FROM COUNT LEN | list | sweep N | binary N"');
  }
  return 0;
}
