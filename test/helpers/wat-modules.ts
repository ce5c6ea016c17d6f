// Tiny hand-written modules for sandbox tests: each export exercises one limit without needing the
// AssemblyScript build. Compiled from text by binaryen (the same library the instrumenter uses).
import binaryen from "binaryen";

const WAT = `(module
 (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
 (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
 (import "extism:host/env" "input_length" (func $input_length (result i64)))
 (import "extism:host/user" "hookbox_log" (func $log (param i32 i64)))
 (memory (export "memory") 1)
 (global $calls (mut i32) (i32.const 0))
 ;; counts to 1000, then outputs "[]": same work every call
 (func (export "count") (result i32) (local $i i32)
   (loop $l (local.set $i (i32.add (local.get $i) (i32.const 1)))
     (br_if $l (i32.lt_u (local.get $i) (i32.const 1000))))
   (call $output_set (call $alloc (i64.const 0)) (i64.const 0))
   (i32.const 0))
 (func (export "spin") (result i32) (local $i i32)
   (loop $l (local.set $i (i32.add (local.get $i) (i32.const 1))) (br $l)) (i32.const 0))
 (func (export "bomb") (result i32)
   (loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1)))) (unreachable))
 (func (export "trap") (result i32) (unreachable))
 ;; outputs as many zero bytes as the input is long
 (func (export "big") (result i32) (local $n i64)
   (local.set $n (call $input_length))
   (call $output_set (call $alloc (local.get $n)) (local.get $n)) (i32.const 0))
 ;; traps on its second call unless the instance was rebuilt in between
 (func (export "once") (result i32)
   (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
   (if (i32.gt_u (global.get $calls) (i32.const 1)) (then (unreachable)))
   (i32.const 0))
 (func (export "log") (result i32) (call $log (i32.const 1) (i64.const 0)) (i32.const 0))
)`;

let bytes: Uint8Array<ArrayBuffer> | undefined;

export function limitsModule(): Uint8Array<ArrayBuffer> {
  if (!bytes) {
    const mod = binaryen.parseText(WAT);
    bytes = mod.emitBinary() as Uint8Array<ArrayBuffer>;
    mod.dispose();
  }
  return bytes;
}
