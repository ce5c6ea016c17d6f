// Benchmark plugin: FNV-1a style hashing over N rounds, a deterministic amount of work per call
// for fuel metering. N: payload field "iterations", else the command args, else 10000.
import { beginCall, getNumber, getString, outputString } from "../../lib";

const DEFAULT_ROUNDS: f64 = 10000;

function rounds(input: Uint8Array): u64 {
  let n = getNumber(input, "iterations", -1);
  if (n < 0) {
    const args = getString(input, "raw_args");
    n = args !== null && args.length > 0 ? F64.parseFloat(args) : DEFAULT_ROUNDS;
  }
  return isNaN(n) || n < 0 ? <u64>DEFAULT_ROUNDS : <u64>n;
}

function hash(n: u64): u64 {
  let h: u64 = 0xcbf29ce484222325;
  for (let i: u64 = 0; i < n; i++) {
    h ^= i & 0xff;
    h *= 0x100000001b3;
  }
  return h;
}

function run(): string {
  const n = rounds(beginCall());
  return '{"iterations":' + n.toString() + ',"hash":"' + hash(n).toString(16) + '"}';
}

/** Observer hooks: the work is the point, the result is discarded. */
export function pre_llm_call(): i32 {
  run();
  return 0;
}
export function post_llm_call(): i32 {
  run();
  return 0;
}
/** `/compute <N>`: {"iterations": N, "hash": "<hex>"} */
export function command_compute(): i32 {
  outputString(run());
  return 0;
}
