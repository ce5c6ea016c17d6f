// Tiny hand-written modules for sandbox tests: each export exercises one limit without needing the
// AssemblyScript build. Source: test/fixtures/limits.wat (rebuilt by test/fixtures/build-wat.mjs).
import { readFileSync } from "node:fs";
import { Op, Writer, writeModule } from "../../runtime/sandbox/wasm-binary.ts";

let bytes: Uint8Array<ArrayBuffer> | undefined;

export function limitsModule(): Uint8Array<ArrayBuffer> {
  return (bytes ??= new Uint8Array(readFileSync(new URL("../fixtures/limits.wasm", import.meta.url))));
}

/** One module of test/fixtures/hostile/ (an attack class of issue 9), built by build-wat.mjs. */
export function hostileModule(name: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(readFileSync(new URL(`../fixtures/hostile/${name}.wasm`, import.meta.url)));
}

/**
 * A valid module of about `bytes` bytes, all code: functions with long straight-line bodies (the
 * worst case per byte for instrumentation). No memory, no imports, nothing exported.
 */
export function codeHeavyModule(bytes: number): Uint8Array<ArrayBuffer> {
  const OPS = 330; // i32.const j; i32.add: ~1,270 bytes per function
  const body = new Writer().u32(0).byte(Op.I32Const).i32(1);
  for (let j = 0; j < OPS; j++) body.byte(Op.I32Const).i32(j).byte(Op.I32Add);
  const one = body.byte(Op.End).toBytes();
  const count = Math.max(1, Math.floor(bytes / (one.length + 2)));
  const type = new Writer().u32(1).byte(0x60).u32(0).u32(1).byte(0x7f);
  const funcs = new Writer().u32(count);
  const code = new Writer().u32(count);
  for (let i = 0; i < count; i++) {
    funcs.u32(0);
    code.sized(one);
  }
  return writeModule([
    { id: 1, body: type.toBytes() },
    { id: 3, body: funcs.toBytes() },
    { id: 10, body: code.toBytes() },
  ]);
}

/**
 * A valid module of `types` function types (all () -> ()), `exports` exported empty functions (of
 * the last type), `functions` more empty functions, `imports` imported kernel functions, `globals`
 * i32 globals and `elements` passive element segments of `entries` function references each: the
 * shape of a module that makes the instrumenter do work per item.
 */
export function manyItemsModule(counts: { types?: number; exports?: number; functions?: number; imports?: number; globals?: number; elements?: number; entries?: number }): Uint8Array<ArrayBuffer> {
  const { types = 1, exports = 0, functions = 0, imports = 0, globals = 0, elements = 0, entries = 1 } = counts;
  const defined = exports + functions;
  const type = new Writer().u32(types);
  for (let i = 0; i < types; i++) type.byte(0x60).u32(0).u32(0);
  const imported = new Writer().u32(imports);
  for (let i = 0; i < imports; i++) imported.name("extism:host/env").name("log_info").byte(0).u32(0);
  const funcs = new Writer().u32(defined);
  const code = new Writer().u32(defined);
  const exported = new Writer().u32(exports);
  const empty = new Writer().u32(0).byte(Op.End).toBytes();
  for (let i = 0; i < defined; i++) {
    funcs.u32(types - 1);
    code.sized(empty);
    if (i < exports) exported.name(`f${i}`).byte(0).u32(imports + i);
  }
  const global = new Writer().u32(globals);
  for (let i = 0; i < globals; i++) global.byte(0x7f).byte(0).byte(Op.I32Const).i32(0).byte(Op.End);
  const element = new Writer().u32(elements);
  for (let i = 0; i < elements; i++) {
    element.u32(1).byte(0).u32(entries); // passive, function indices
    for (let j = 0; j < entries; j++) element.u32(imports);
  }
  return writeModule([
    { id: 1, body: type.toBytes() },
    ...(imports > 0 ? [{ id: 2, body: imported.toBytes() }] : []),
    { id: 3, body: funcs.toBytes() },
    ...(globals > 0 ? [{ id: 6, body: global.toBytes() }] : []),
    { id: 7, body: exported.toBytes() },
    ...(elements > 0 ? [{ id: 9, body: element.toBytes() }] : []),
    { id: 10, body: code.toBytes() },
  ]);
}

/**
 * A valid module of one exported function "run" (type 0: () -> ()) with `code` as its body
 * (instructions, without the locals or the final end), and `types` more function types
 * (indices 1...) as [params, results] counts of i32.
 */
export function oneBodyModule(code: Writer, types: Array<[number, number]> = []): Uint8Array<ArrayBuffer> {
  const type = new Writer().u32(1 + types.length).byte(0x60).u32(0).u32(0);
  for (const [p, r] of types) type.byte(0x60).u32(p).raw(new Array<number>(p).fill(0x7f)).u32(r).raw(new Array<number>(r).fill(0x7f));
  const body = new Writer().u32(0).raw(code.view()).byte(Op.End);
  return writeModule([
    { id: 1, body: type.toBytes() },
    { id: 3, body: new Writer().u32(1).u32(0).toBytes() },
    { id: 7, body: new Writer().u32(1).name("run").byte(0).u32(0).toBytes() },
    { id: 10, body: new Writer().u32(1).sized(body).toBytes() },
  ]);
}

/**
 * A module of `functions` functions (type 0: () -> i32) that each declare `locals` i64 locals and
 * return the first, wrapped, and an export "run" (() -> i32, 0) that calls the first `times` times,
 * then each of the others once: the calls cost a few instructions, the locals V8 zeroes at each.
 */
export function manyLocalsModule(functions: number, locals: number, times: number): Uint8Array<ArrayBuffer> {
  const DROP = 0x1a;
  const BR_IF = 0x0d;
  const fat = new Writer().u32(1).u32(locals).byte(0x7e).byte(Op.LocalGet).u32(0).byte(Op.I32WrapI64).byte(Op.End);
  const run = new Writer().u32(1).u32(1).byte(0x7f); // local 0: the count
  run.byte(Op.Loop).byte(0x40).byte(Op.Call).u32(0).byte(DROP);
  run.byte(Op.LocalGet).u32(0).byte(Op.I32Const).i32(1).byte(Op.I32Add).byte(Op.LocalTee).u32(0).byte(Op.I32Const).i32(times).byte(Op.I32LtS).byte(BR_IF).u32(0).byte(Op.End);
  for (let f = 1; f < functions; f++) run.byte(Op.Call).u32(f).byte(DROP);
  run.byte(Op.I32Const).i32(0).byte(Op.End);
  const funcs = new Writer().u32(functions + 1);
  const code = new Writer().u32(functions + 1);
  for (let f = 0; f <= functions; f++) {
    funcs.u32(0);
    code.sized(f < functions ? fat : run);
  }
  return writeModule([
    { id: 1, body: new Writer().u32(1).byte(0x60).u32(0).u32(1).byte(0x7f).toBytes() },
    { id: 3, body: funcs.toBytes() },
    { id: 5, body: new Writer().u32(1).byte(0).u32(1).toBytes() },
    { id: 7, body: new Writer().u32(2).name("memory").byte(2).u32(0).name("run").byte(0).u32(functions).toBytes() },
    { id: 10, body: code.toBytes() },
  ]);
}

/**
 * A plugin module whose `command_nest` is ONE function of `levels` nested empty blocks (3 bytes a
 * level), then returns 0; it exports a one-page memory. Valid, cheap to run (no instruction in the
 * blocks), and costly for V8 to compile (about 5 us a level): what an outside probe made to hold the
 * server's thread at the function's first call, when V8 compiled it then (runtime/sandbox/eager-compile.ts).
 */
export function nestedBlocksModule(levels: number): Uint8Array<ArrayBuffer> {
  const body = new Writer(levels * 3 + 8).u32(0);
  for (let i = 0; i < levels; i++) body.byte(0x02).byte(0x40); // block (empty type)
  for (let i = 0; i < levels; i++) body.byte(Op.End);
  body.byte(Op.I32Const).i32(0).byte(Op.End);
  const type = new Writer().u32(1).byte(0x60).u32(0).u32(1).byte(0x7f); // () -> i32
  const exports = new Writer().u32(2).name("memory").byte(2).u32(0).name("command_nest").byte(0).u32(0);
  return writeModule([
    { id: 1, body: type.toBytes() },
    { id: 3, body: new Writer().u32(1).u32(0).toBytes() },
    { id: 5, body: new Writer().u32(1).byte(0).u32(1).toBytes() },
    { id: 7, body: exports.toBytes() },
    { id: 10, body: new Writer().u32(1).sized(body).toBytes() },
  ]);
}
