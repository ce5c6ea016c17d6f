// Load-time instrumentation of a plugin module: fuel metering and a hard memory cap, written at the
// byte level (binaryen.js would do it too, but under tsx importing its 15 MB bundle takes ~30 s).
// The JS Extism SDK has neither limit (its memory.maxPages only bounds host-side buffers). The
// output is a pure function of (bytes, options): deterministic.
//
// Fuel: one added i32 global. Every function entry and every loop header subtracts the static
// instruction count of the code it guards (a loop body is charged per iteration, nested loops
// separately); when the counter drops below zero the module calls the host's `refill(counter)`,
// which grants the next slice or throws (budget spent / deadline passed). Every exported function
// is wrapped so that `end(left)` reports the rest at each call's end and answers the next call's
// grant, which the wrapper keeps in an added global: the next call starts from it without asking the
// host (`begin()` is called only when no grant is kept: an instance's first call). No SDK access to
// module globals is needed, and in a worker thread the end is served there (worker-thread.ts), so a
// warm call makes no round trip to the server's thread for its fuel. An export that returns an i32 reports it through
// `finish(code, left)` instead of `end`: Extism's JS SDK ignores the status code, the sandbox fails
// the call on a non-zero one.
//
// Bulk operations (memory.fill/copy/init, table.fill/copy/init/grow) do work proportional to their
// length operand, not one instruction's worth: each first calls an added `charge_bytes(len)` or
// `charge_elems(len)` that subtracts that work from the counter (and refills / checks the deadline
// like a loop header) and passes the length through unchanged.
//
// The counter starts at START_FUEL: a start function runs that much at instantiation without the
// host; beyond it, it asks the host's refill like any call, which checks the deadline.
//
// Memory: the memory section gets a maximum; and every memory.grow first calls an added
// `grow_check(delta)` that tells the host (`oom(delta)`) when the grow will be refused, so the trap
// the language runtime then raises (AssemblyScript: `unreachable`) is reported as a memory failure.
// Tables get a maximum the same way (table.grow past it returns -1, as the spec says).
//
// Host blocks: every use of the Extism kernel's `alloc` import (calls, ref.func, table elements)
// goes through an added `alloc_shim(n)` that charges HOST_CALL_FUEL + n/16 and refuses (through
// `kernel_oom()`, then a trap) once one call's blocks would pass the memory allowance; the export
// wrappers reset that running total. In the module, so it holds in-thread and in a worker alike,
// and a refused block is never made. Kernel log imports go through a shim that charges a host call.
import { HOST_CALL_FUEL, KERNEL_BLOCK_BYTES, MAX_CALL_BLOCKS } from "./fuel.ts";
import { turnEventLoop } from "./inline-slice.ts";
import { IntList } from "../util/int-list.ts";
import { checkShape, MAX_BLOCK_ARITY, MAX_ELEMENT_ENTRIES, MAX_IMPORT_NAME_CHARS, MAX_LOCALS, ModuleShapeError, type Signatures } from "./module-shape.ts";
import { Op, Reader, WasmFormatError, Writer, readInstr, readSections, rewriteVec, sectionRank, valtype, writeModule, type Section } from "./wasm-binary.ts";

/** Import module of the fuel host functions the instrumented module calls. */
export const FUEL_MODULE = "hookbox:fuel";

export interface InstrumentOptions {
  /** Largest linear memory in 64 KiB pages, written as the memory's maximum. */
  memoryPages: number;
  /** Largest table in elements, written as every table's maximum (default TABLE_ELEMENTS). */
  tableElements?: number;
  /** Largest single kernel block (default KERNEL_BLOCK_BYTES). */
  blockBytes?: number;
}


/** Default cap on a table's elements: far above what compilers emit, far below a memory problem. */
export const TABLE_ELEMENTS = 65_536;
/** Bytes of a bulk memory operation charged as one fuel unit (about one instruction's time). */
const BYTES_PER_UNIT_SHIFT = 4;
/** Static cost of a direct call to an imported (host) function: the cheapest kernel call's price. */
const HOST_CALL_UNITS = 20;
/** Fuel a start function gets before it must ask the host (about 1 ms of code). */
export const START_FUEL = 1_000_000;

/**
 * Of each module instrument() wrote: the sum over its function bodies of (locals + CALL_WEIGHT) x
 * call sites, plus its instructions, the meters' included. Asyncify (rewind.ts) saves and restores a function's locals
 * around each call that may unwind, so its rewrite, and Binaryen's memory for it, grows with this
 * (an outside probe's one function of 20,000 locals and 20,000 calls took 3.7 GiB for 20 s; 1,000 x
 * 1,000: 350 MiB, 4 s; 150,000 calls and 2 locals: 470 MiB, past 20 s); and Binaryen holds a node
 * per instruction (1.4 M nested blocks and no call: 470 MB more, then its recursion overflowed).
 * The shipped plugins weigh 1,300-23,000.
 */
export const suspendWeights = new WeakMap<Uint8Array, number>();
/** What a call site weighs apart from the locals it saves (a calls-only body still costs). */
const CALL_WEIGHT = 8;
const CALL_INDIRECT = 0x11;

export class InstrumentError extends Error {
  override name = "InstrumentError";
}

const I32 = 0x7f;
const FUEL_IMPORTS = [
  { name: "refill", params: [I32], results: [I32] },
  { name: "begin", params: [], results: [I32] },
  { name: "end", params: [I32], results: [I32] },
  { name: "oom", params: [I32], results: [] },
  { name: "finish", params: [I32, I32], results: [I32] },
  { name: "kernel_oom", params: [], results: [] },
] as const;
const [REFILL, BEGIN, END, OOM, FINISH, KERNEL_OOM] = [0, 1, 2, 3, 4, 5];
const I64 = 0x7e;
/** Import module of the Extism kernel (its block allocator `alloc`, `log_*`...). */
export const KERNEL_MODULE = "extism:host/env";

interface Layout {
  importedFuncs: number;
  importedGlobals: number;
  /** Type index of every function (imports first). */
  funcTypes: number[];
  typeCount: number;
  definedGlobals: number;
  /** Function index of the imported kernel alloc, if the module imports it. */
  allocImport: number | undefined;
  /** Imported kernel log functions: each line crosses to the host's logger (from a worker, a message). */
  logImports: number[];
}

/**
 * Largest module accepted: compiling (and instrumenting) happens on the event loop, and its time
 * and memory grow with the size (an 8 MB module blocked it 3.3 s at +1.4 GB).
 */
export const MAX_MODULE_BYTES = 4 * 1024 * 1024;
/**
 * Largest instrumented module: the meters make a module larger (a loop header gains a dozen bytes),
 * and compiling costs memory by the byte; a module of nothing but empty loops grows eightfold.
 */
export const MAX_INSTRUMENTED_BYTES = 4 * MAX_MODULE_BYTES;
/** Instructions of one function body read or written between two checks of the slice's time. */
const BODY_STRETCH = 65_536;
/** Longest stretch of instrumentation work between two turns of the event loop, ms. */
const INSTRUMENT_SLICE_MS = 8;

export async function instrument(wasm: Uint8Array<ArrayBuffer>, opts: InstrumentOptions): Promise<Uint8Array<ArrayBuffer>> {
  if (wasm.byteLength > MAX_MODULE_BYTES) {
    throw new InstrumentError(`module of ${wasm.byteLength} bytes exceeds the limit of ${MAX_MODULE_BYTES} bytes (4 MiB)`);
  }
  // No WebAssembly.validate here: it runs on the server's thread, and what V8 spends on it grows
  // with what a module declares (module-shape.ts). The module is read by the rewrite below, under
  // the shape's limits and in slices, and validated by the compile that follows, off the thread.
  let sections: Section[];
  try {
    sections = readSections(wasm);
  } catch (err) {
    throw new InstrumentError(`not a valid WebAssembly module (${(err as Error).message})`);
  }
  let out: Uint8Array<ArrayBuffer>;
  try {
    out = await rewrite(sections, checkShape(sections), opts);
  } catch (err) {
    if (err instanceof ModuleShapeError || err instanceof WasmFormatError) throw new InstrumentError(err.message);
    if (err instanceof InstrumentError) throw err;
    // Something the rewrite did not expect: an invalid module says why when compiled (off the thread).
    const invalid = await WebAssembly.compile(wasm).then(() => undefined, (e: Error) => e.message);
    throw invalid === undefined ? err : new InstrumentError(`not a valid WebAssembly module (${invalid})`);
  }
  if (out.byteLength > MAX_INSTRUMENTED_BYTES) throw tooLarge(out.byteLength);
  return out;
}

const tooLarge = (bytes: number) =>
  new InstrumentError(`module would be more than ${MAX_INSTRUMENTED_BYTES} bytes once metered (${bytes} so far): its loops or exports are too many for its size`);

async function rewrite(sections: Section[], types: Signatures, opts: InstrumentOptions): Promise<Uint8Array<ArrayBuffer>> {
  const layout = readLayout(sections);
  const k = FUEL_IMPORTS.length;
  const I = layout.importedFuncs;
  const fuelFn = (i: number) => I + i;
  const definedCount = layout.funcTypes.length - I;
  const fuelGlobal = layout.importedGlobals + layout.definedGlobals;
  const blocksGlobal = fuelGlobal + 1;
  const keptGlobal = fuelGlobal + 2;
  const exports = readExports(find(sections, 7));
  const funcExports = exports.filter((e) => e.kind === 0);
  const signatureOf = (func: number) => {
    const t = types[typeIndexOf(func)];
    if (!t) throw new WasmFormatError(`function ${func} has no type`);
    return t;
  };
  // New function indices: [old imports][fuel imports][old defined][wrappers][grow_check][charge_bytes]
  // [charge_elems][alloc_shim][one log shim per kernel log import]
  const firstWrapper = I + k + definedCount;
  const growCheck = firstWrapper + funcExports.length;
  const chargeBytes = growCheck + 1;
  const chargeElems = growCheck + 2;
  const allocShim = growCheck + 3;
  const logShim = new Map(layout.logImports.map((idx, i) => [idx, allocShim + 1 + i]));
  // [fill_chunked][copy_chunked]: every memory.fill / memory.copy is rewritten into a call of one.
  const fillChunked = allocShim + 1 + layout.logImports.length;
  const copyChunked = fillChunked + 1;
  const hasMemory = find(sections, 5) !== undefined;
  const remap = (idx: number) => (idx === layout.allocImport ? allocShim : (logShim.get(idx) ?? (idx < I ? idx : idx + k)));
  const newTypes = FUEL_IMPORTS.map((f, i) => ({ ...f, index: layout.typeCount + i }));
  const growType = newTypes[REFILL]!.index; // (i32) -> i32
  const allocType = layout.typeCount + newTypes.length; // (i64) -> i64
  const bulkType = allocType + 1; // (i32, i32, i32) -> ()

  const out = new Map<number, Uint8Array>();
  out.set(1, appendVec(find(sections, 1), [...newTypes.map((t) => encodeFuncType(t.params, t.results)), encodeFuncType([I64], [I64]), encodeFuncType([I32, I32, I32], [])]));
  out.set(
    2,
    appendVec(
      find(sections, 2),
      newTypes.map((t) => new Writer().name(FUEL_MODULE).name(t.name).byte(0x00).u32(t.index)),
    ),
  );
  const typeIndexOf = (func: number) => {
    const t = layout.funcTypes[func];
    if (t === undefined) throw new WasmFormatError(`function ${func} does not exist`);
    return t;
  };
  const wrapperTypes = funcExports.map((e) => typeIndexOf(e.index));
  out.set(
    3,
    appendVec(
      find(sections, 3),
      [...wrapperTypes, growType, growType, growType, allocType, ...layout.logImports.map(typeIndexOf), bulkType, bulkType].map((t) => new Writer().u32(t)),
    ),
  );
  out.set(
    6,
    appendVec(globalsOf(sections, remap), [
      new Writer().byte(I32).byte(0x01).byte(Op.I32Const).i32(START_FUEL).byte(Op.End),
      new Writer().byte(I64).byte(0x01).byte(Op.I64Const).i64(0).byte(Op.End), // this call's host-block bytes
      new Writer().byte(I32).byte(0x01).byte(Op.I32Const).i32(0).byte(Op.End), // the next call's grant (0: ask begin)
    ]),
  );
  let wrapperIdx = firstWrapper;
  out.set(
    7,
    encodeVec(
      exports.map((e) => {
        const w = new Writer().name(e.name).byte(e.kind);
        return e.kind === 0 ? w.u32(wrapperIdx++) : w.u32(e.index);
      }),
    ),
  );
  const start = find(sections, 8);
  if (start) out.set(8, new Writer().u32(remap(new Reader(start).u32())).toBytes());
  const elements = find(sections, 9);
  if (elements) out.set(9, rewriteElements(elements, remap));

  const meter: MeterCtx = { fuelGlobal, refill: fuelFn(REFILL), growCheck, chargeBytes, chargeElems, fillChunked, copyChunked, importedFuncs: I, remap, types, suspendWeight: 0, locals: 0 };
  const bodies = readVec(find(sections, 10) ?? new Uint8Array([0]), (r) => r.bytes(r.u32()));
  // The added functions first (they are few and small), so the section's count is known up front.
  const added: Uint8Array[] = [];
  const globals = { fuel: fuelGlobal, blocks: blocksGlobal, kept: keptGlobal };
  await inSlices(funcExports, (e) => {
    const [nParams, results] = signatureOf(e.index);
    // An export returning one i32 (Extism's status code) reports it through `finish`.
    const returnsCode = results.length === 1 && results[0] === I32;
    added.push(wrapperBody(nParams, remap(e.index), globals, fuelFn(BEGIN), returnsCode ? fuelFn(FINISH) : fuelFn(END), returnsCode));
  });
  added.push(growCheckBody(opts.memoryPages, fuelFn(OOM), find(sections, 5) !== undefined));
  added.push(chargeBody(BYTES_PER_UNIT_SHIFT, meter), chargeBody(0, meter));
  // Without an alloc import the shim is never referenced; it calls `unreachable` in its place.
  const cap = opts.memoryPages * 65_536;
  added.push(allocShimBody(cap, Math.min(cap, opts.blockBytes ?? KERNEL_BLOCK_BYTES), globals, fuelFn(KERNEL_OOM), layout.allocImport, meter));
  for (const idx of layout.logImports) added.push(chargedCallBody(signatureOf(idx)[0], HOST_CALL_FUEL, idx, meter));
  added.push(bulkChunkedBody("fill", meter, hasMemory), bulkChunkedBody("copy", meter, hasMemory));
  // One growing buffer for the section and one scratch buffer reused for every body: a buffer per
  // body cost more than the instrumentation itself on a large module.
  const section = new Writer().u32(bodies.length + added.length);
  const scratch = new Writer();
  await inSlices(bodies, function* (b) {
    yield* instrumentBody(b, meter, scratch.reset());
    section.sized(scratch);
    if (section.length > MAX_INSTRUMENTED_BYTES) throw tooLarge(section.length);
  });
  for (const a of added) section.sized(a);
  out.set(10, section.view());

  // Reassemble in canonical order; the "name" section would now lie about indices, so drop it.
  const result: Section[] = [];
  for (const s of sections) {
    if (s.id === 0 && new Reader(s.body).name() === "name") continue;
    result.push(out.has(s.id) ? { id: s.id, body: out.get(s.id)! } : s);
    out.delete(s.id);
  }
  for (const [id, body] of out) {
    const at = result.findIndex((s) => s.id !== 0 && sectionRank(s.id) > sectionRank(id));
    result.splice(at === -1 ? result.length : at, 0, { id, body });
  }
  capTables(result, opts.tableElements ?? TABLE_ELEMENTS);
  const written = capMemory(result, opts.memoryPages);
  suspendWeights.set(written, meter.suspendWeight);
  return written;
}

/**
 * Runs `work` on each item in slices, the event loop turning between them: a large module (up to
 * 4 MiB: ~100 ms of work) is instrumented while the server keeps answering. A work that is a
 * generator is checked at each of its yields too (one function body may be the whole module).
 */
async function inSlices<T>(items: readonly T[], work: (item: T) => Iterable<unknown> | void): Promise<void> {
  let since = performance.now();
  const due = () => performance.now() - since > INSTRUMENT_SLICE_MS;
  const pause = async () => {
    await turnEventLoop();
    since = performance.now();
  };
  for (const item of items) {
    const steps = work(item);
    if (steps) for (const _ of steps) if (due()) await pause();
    if (due()) await pause();
  }
}

function find(sections: Section[], id: number): Uint8Array | undefined {
  return sections.find((s) => s.id === id)?.body;
}

function readVec<T>(body: Uint8Array, item: (r: Reader) => T): T[] {
  const r = new Reader(body);
  const out: T[] = [];
  for (let n = r.u32(); n > 0; n--) out.push(item(r));
  return out;
}

function encodeVec(items: Array<Writer | Uint8Array>): Uint8Array {
  const w = new Writer().u32(items.length);
  for (const it of items) w.raw(it instanceof Writer ? it.toBytes() : it);
  return w.toBytes();
}

/** Appends items to a section that is a vector (or creates it). */
function appendVec(body: Uint8Array | undefined, items: Writer[]): Uint8Array {
  if (!body) return encodeVec(items);
  const r = new Reader(body);
  const n = r.u32();
  const w = new Writer().u32(n + items.length).raw(body.subarray(r.pos));
  for (const it of items) w.raw(it.toBytes());
  return w.toBytes();
}

function encodeFuncType(params: readonly number[], results: readonly number[]): Writer {
  return new Writer().byte(0x60).u32(params.length).raw(params).u32(results.length).raw(results);
}

function readLayout(sections: Section[]): Layout {
  const typeCount = new Reader(find(sections, 1) ?? new Uint8Array([0])).u32();
  const funcTypes: number[] = [];
  let importedGlobals = 0;
  let allocImport: number | undefined;
  const logImports: number[] = [];
  const imports = find(sections, 2);
  if (imports) {
    // The import section is read here, once: it is also where imports hookbox refuses are found.
    readVec(imports, (r) => {
      const module = r.name();
      const name = r.name();
      const kind = r.byte();
      if (module === FUEL_MODULE) throw new InstrumentError(`module may not import "${FUEL_MODULE}"`);
      if (Math.max(module.length, name.length) > MAX_IMPORT_NAME_CHARS) {
        throw new InstrumentError(`module imports a name longer than ${MAX_IMPORT_NAME_CHARS} characters ("${module.slice(0, 40)}" "${name.slice(0, 40)}"...)`);
      }
      if (kind === 0x02) throw new InstrumentError("modules that import their memory are not supported");
      if (kind === 0x01) throw new InstrumentError("modules that import a table are not supported");
      if (kind === 0x00 && module === KERNEL_MODULE && name === "alloc") {
        // Every use of alloc goes through the capped alloc_shim; a second import of it would not.
        if (allocImport !== undefined) throw new InstrumentError(`module imports "${KERNEL_MODULE}" "alloc" more than once`);
        allocImport = funcTypes.length;
      }
      if (kind === 0x00 && module === KERNEL_MODULE && name.startsWith("log_")) logImports.push(funcTypes.length);
      if (kind === 0x00) funcTypes.push(r.u32());
      else if (kind === 0x03) {
        importedGlobals++;
        valtype(r);
        r.byte();
      } else throw new WasmFormatError(`unsupported import kind ${kind}`);
    });
  }
  const importedFuncs = funcTypes.length;
  const funcs = find(sections, 3);
  // One by one: push(...list) of a million functions overflows the call stack.
  if (funcs) for (const t of readVec(funcs, (r) => r.u32())) funcTypes.push(t);
  const globals = find(sections, 6);
  const definedGlobals = globals ? new Reader(globals).u32() : 0;
  return { importedFuncs, importedGlobals, funcTypes, typeCount, definedGlobals, allocImport, logImports };
}

function readExports(body: Uint8Array | undefined): Array<{ name: string; kind: number; index: number }> {
  return body ? readVec(body, (r) => ({ name: r.name(), kind: r.byte(), index: r.u32() })) : [];
}

/** The globals instrumentation adds: fuel counter, this call's host-block bytes, kept grant. */
interface CallGlobals {
  fuel: number;
  blocks: number;
  kept: number;
}

interface MeterCtx {
  fuelGlobal: number;
  refill: number;
  growCheck: number;
  chargeBytes: number;
  chargeElems: number;
  /** (d, v, n) and (d, s, n): memory.fill and memory.copy in metered chunks (bulkChunkedBody). */
  fillChunked: number;
  copyChunked: number;
  importedFuncs: number;
  remap: (idx: number) => number;
  /** The module's function types (a block typed by one is checked against MAX_BLOCK_ARITY). */
  types: Signatures;
  /** Sum over the bodies of locals x call sites, plus instructions: what asyncify's rewrite grows with (suspendWeights). */
  suspendWeight: number;
  /** Locals of the bodies read so far (MAX_LOCALS). */
  locals: number;
}

/**
 * A function's entry costs a unit per this many locals it declares: V8 zeroes them at every call
 * (50,000 locals: 7.5 us a call, where the call's instructions cost 5 units), so a loop calling such
 * a function reached no refill, and no clock check, for seconds.
 */
const LOCALS_PER_UNIT = 8;

/** The instructions instrumentBody's second pass may rewrite (or meter after: loops). */
const REWRITTEN: ReadonlySet<number> = new Set([Op.Call, Op.ReturnCall, Op.RefFunc, Op.MemoryGrow, Op.Prefix, Op.Loop]);

/** 0xfc sub-opcodes whose last operand is a length in bytes / in table elements. */
const BULK_BYTES = new Set([8, 10, 11]); // memory.init, memory.copy, memory.fill
const MEMORY_COPY = 10;
const MEMORY_FILL = 11;
/**
 * Bytes of one chunk of a rewritten memory.fill / memory.copy: the meter (and with it the clock and
 * the in-thread slice) runs between chunks, every 16 chunks at the latest (FUEL_SLICE).
 */
export const BULK_CHUNK_BYTES = 1 << 20;
const BULK_ELEMS = new Set([12, 14, 15, 17]); // table.init, table.copy, table.grow, table.fill

/** fuel -= cost; if (fuel < 0) fuel = refill(fuel) */
/** The fewest bytes meterCode writes (one-byte indices and cost). */
const METER_BYTES = 13;
/** The instructions meterCode writes: Binaryen's rewinding transform sees them too (suspendWeights). */
const METER_INSTRUCTIONS = 12;

function meterCode(w: Writer, cost: number, m: MeterCtx): void {
  const g = m.fuelGlobal;
  w.byte(Op.GlobalGet).u32(g).byte(Op.I32Const).i32(Math.max(1, cost)).byte(Op.I32Sub).byte(Op.GlobalSet).u32(g);
  w.byte(Op.GlobalGet).u32(g).byte(Op.I32Const).i32(0).byte(Op.I32LtS).byte(Op.If).byte(0x40);
  w.byte(Op.GlobalGet).u32(g).byte(Op.Call).u32(m.refill).byte(Op.GlobalSet).u32(g).byte(Op.End);
}

/**
 * Writes the metered copy of one function body into `w`. Two passes: first the cost of every
 * metering region (function entry, each loop), then the rewrite with meters inserted and function
 * indices shifted.
 */
function* instrumentBody(body: Uint8Array, m: MeterCtx, w: Writer): Generator<void, void, void> {
  const r = new Reader(body);
  const localsStart = r.pos;
  let locals = 0;
  for (let n = r.u32(); n > 0; n--) {
    locals += r.u32();
    valtype(r);
  }
  m.locals += locals;
  if (m.locals > MAX_LOCALS) throw new ModuleShapeError(`module's functions declare more than ${MAX_LOCALS} locals`);
  let calls = 0;
  const codeStart = r.pos;
  // Only the instructions the second pass rewrites are kept, as numbers (op, start, immediates, end)
  // in typed arrays: a body of millions of blocks, nops or loops kept an object per instruction,
  // hundreds of MB and collector pauses of a quarter of a second on the thread.
  const kept = new IntList();
  const costs = new IntList(); // region 0 = function entry; one more per loop, in order
  costs.push(Math.floor(locals / LOCALS_PER_UNIT));
  const stack = new IntList(); // region of each open block
  stack.push(0);
  let lastOp = -1;
  let instructions = 0;
  for (let read = 1; !r.done; read++, instructions++) {
    const ins = readInstr(r);
    lastOp = ins.op;
    if (REWRITTEN.has(ins.op)) {
      kept.push(ins.op);
      kept.push(ins.start);
      kept.push(ins.immStart);
      kept.push(ins.end);
    }
    if (read % BODY_STRETCH === 0) yield;
    const region = stack.last();
    if (ins.op === Op.End) {
      if (stack.length === 0) throw new WasmFormatError("a function body closes more blocks than it opens");
      stack.pop();
      continue;
    }
    // A call into the host costs what a host call costs the host, not one instruction.
    costs.set(region, costs.get(region) + (ins.op === Op.Call && new Reader(body, ins.immStart).u32() < m.importedFuncs ? HOST_CALL_UNITS : 1));
    if (ins.op === Op.Call || ins.op === CALL_INDIRECT) calls++;
    if (ins.op === Op.Loop || ins.op === Op.Block || ins.op === Op.If) checkBlockType(body, ins.immStart, m.types);
    if (ins.op === Op.Loop) {
      costs.push(0);
      stack.push(costs.length - 1);
    } else if (ins.op === Op.Block || ins.op === Op.If) stack.push(region);
  }
  // The body's own end closes its last block: anything else means it was read wrong.
  if (stack.length !== 0 || lastOp !== Op.End) throw new WasmFormatError("a function body does not end where its size says");
  m.suspendWeight += (locals + CALL_WEIGHT) * calls + instructions + METER_INSTRUCTIONS * costs.length;
  // Each meter adds about a dozen bytes: a body whose meters alone would pass the limit is not written.
  const atLeast = w.length + body.length + costs.length * METER_BYTES;
  if (atLeast > MAX_INSTRUMENTED_BYTES) throw tooLarge(atLeast);
  w.raw(body.subarray(localsStart, codeStart));
  meterCode(w, costs.get(0), m);
  let loop = 0;
  // Unchanged instructions are copied in runs, not one by one.
  let copied = codeStart;
  const copyTo = (pos: number) => {
    if (pos > copied) w.raw(body.subarray(copied, pos));
    copied = pos;
  };
  for (let i = 0; i < kept.length; i += 4) {
    if ((i >> 2) % BODY_STRETCH === BODY_STRETCH - 1) {
      if (w.length > MAX_INSTRUMENTED_BYTES) throw tooLarge(w.length);
      yield;
    }
    // One kept instruction: its opcode, start, immediates' start and end (no object per instruction).
    const op = kept.get(i), start = kept.get(i + 1), immStart = kept.get(i + 2), end = kept.get(i + 3);
    if (op === Op.Call || op === Op.ReturnCall || op === Op.RefFunc) {
      copyTo(start);
      w.byte(op).u32(m.remap(new Reader(body, immStart).u32()));
      copied = end;
      continue;
    }
    if (op === Op.MemoryGrow) {
      copyTo(start);
      w.byte(Op.Call).u32(m.growCheck);
    }
    if (op === Op.Prefix) {
      const sub = new Reader(body, immStart).u32();
      // memory.fill / memory.copy (memory 0: the only one) become a call that runs them in chunks.
      const chunked = sub === MEMORY_FILL ? m.fillChunked : sub === MEMORY_COPY ? m.copyChunked : undefined;
      if (chunked !== undefined) {
        copyTo(start);
        w.byte(Op.Call).u32(chunked);
        copied = end;
        continue;
      }
      const charge = BULK_BYTES.has(sub) ? m.chargeBytes : BULK_ELEMS.has(sub) ? m.chargeElems : undefined;
      if (charge !== undefined) {
        copyTo(start);
        w.byte(Op.Call).u32(charge);
      }
    }
    if (op === Op.Loop) {
      copyTo(end);
      meterCode(w, costs.get(++loop), m);
    }
  }
  copyTo(body.length);
}

/**
 * A block type that names a function type takes and leaves that type's values: V8's validation
 * costs blocks x values, so a module of many blocks of a wide type is refused here, before it.
 */
function checkBlockType(body: Uint8Array, at: number, types: Signatures): void {
  const b = body[at]!;
  if (b === 0x40 || (b & 0xc0) === 0x40) return; // empty, or one value type
  const index = new Reader(body, at).u32();
  const type = types[index];
  if (!type) throw new WasmFormatError(`a block names type ${index}, which does not exist`);
  const arity = type[0] + type[1].length;
  if (arity > MAX_BLOCK_ARITY) throw new ModuleShapeError(`module has a block of ${arity} values (type ${index}), limit is ${MAX_BLOCK_ARITY}`);
}

/**
 * fuel = the kept grant, or begin() when none is kept (then none is); no host blocks yet; call the
 * original with the same arguments; kept = end(fuel), or finish(code, fuel) for an export that
 * returns a status code (kept in an added local and returned). Results stay on the stack.
 */
function wrapperBody(params: number, target: number, g: CallGlobals, begin: number, end: number, returnsCode: boolean): Uint8Array {
  const w = returnsCode ? new Writer().u32(1).u32(1).byte(I32) : new Writer().u32(0); // the code's local
  w.byte(Op.GlobalGet).u32(g.kept).byte(Op.I32Eqz);
  w.byte(Op.If).byte(0x40).byte(Op.Call).u32(begin).byte(Op.GlobalSet).u32(g.fuel);
  w.byte(Op.Else).byte(Op.GlobalGet).u32(g.kept).byte(Op.GlobalSet).u32(g.fuel).byte(Op.End);
  w.byte(Op.I32Const).i32(0).byte(Op.GlobalSet).u32(g.kept);
  w.byte(Op.I64Const).i64(0).byte(Op.GlobalSet).u32(g.blocks);
  for (let i = 0; i < params; i++) w.byte(Op.LocalGet).u32(i);
  w.byte(Op.Call).u32(target);
  if (returnsCode) w.byte(Op.LocalTee).u32(params);
  w.byte(Op.GlobalGet).u32(g.fuel).byte(Op.Call).u32(end).byte(Op.GlobalSet).u32(g.kept);
  if (returnsCode) w.byte(Op.LocalGet).u32(params);
  w.byte(Op.End);
  return w.toBytes();
}

/** grow_check(delta) = (if memory.size + delta > max: oom(delta)); delta */
function growCheckBody(maxPages: number, oom: number, hasMemory: boolean): Uint8Array {
  const w = new Writer().u32(0);
  // Without a memory there is no memory.grow to check (and memory.size would not validate).
  if (!hasMemory) return w.byte(Op.Unreachable).byte(Op.End).toBytes();
  w.byte(Op.MemorySize).byte(0).byte(Op.LocalGet).u32(0).byte(Op.I32Add).byte(Op.I32Const).i32(maxPages).byte(Op.I32GtU);
  w.byte(Op.If).byte(0x40).byte(Op.LocalGet).u32(0).byte(Op.Call).u32(oom).byte(Op.End);
  w.byte(Op.LocalGet).u32(0).byte(Op.End);
  return w.toBytes();
}

/**
 * charge(len) = fuel -= (len >>> shift) & 0x3fffffff (an unsigned length, never a negative charge);
 * refill when below zero; len.
 */
function chargeBody(shift: number, m: MeterCtx): Uint8Array {
  const g = m.fuelGlobal;
  const w = new Writer().u32(0);
  w.byte(Op.GlobalGet).u32(g).byte(Op.LocalGet).u32(0).byte(Op.I32Const).i32(shift).byte(Op.I32ShrU);
  w.byte(Op.I32Const).i32(0x3fff_ffff).byte(Op.I32And).byte(Op.I32Sub).byte(Op.GlobalSet).u32(g);
  w.byte(Op.GlobalGet).u32(g).byte(Op.I32Const).i32(0).byte(Op.I32LtS).byte(Op.If).byte(0x40);
  w.byte(Op.GlobalGet).u32(g).byte(Op.Call).u32(m.refill).byte(Op.GlobalSet).u32(g).byte(Op.End);
  w.byte(Op.LocalGet).u32(0).byte(Op.End);
  return w.toBytes();
}

/**
 * alloc_shim(n) = if (n > blockCap || blocks + n > cap) { kernel_oom(); unreachable }
 *                 blocks += n; fuel -= HOST_CALL_FUEL + n/16 (refill below zero);
 *                 a = alloc(n); if (a >>> 48 >= MAX_CALL_BLOCKS) { kernel_oom(); unreachable }; a
 * The SDK numbers a call's blocks (the module's and host answers together) in the top 16 bits of a
 * signed i64: the check on the address bounds them all, where a count of the module's own did not.
 */
function allocShimBody(cap: number, blockCap: number, g: CallGlobals, kernelOom: number, alloc: number | undefined, m: MeterCtx): Uint8Array {
  const w = new Writer().u32(1).u32(1).byte(I64); // local 1: the address
  if (alloc === undefined) return w.byte(Op.Unreachable).byte(Op.End).toBytes();
  const refuse = () => w.byte(Op.If).byte(0x40).byte(Op.Call).u32(kernelOom).byte(Op.Unreachable).byte(Op.End);
  w.byte(Op.LocalGet).u32(0).byte(Op.I64Const).i64(blockCap).byte(Op.I64GtU);
  w.byte(Op.GlobalGet).u32(g.blocks).byte(Op.LocalGet).u32(0).byte(Op.I64Add).byte(Op.I64Const).i64(cap).byte(Op.I64GtU);
  w.byte(Op.I32Or);
  refuse();
  w.byte(Op.GlobalGet).u32(g.blocks).byte(Op.LocalGet).u32(0).byte(Op.I64Add).byte(Op.GlobalSet).u32(g.blocks);
  w.byte(Op.GlobalGet).u32(g.fuel).byte(Op.LocalGet).u32(0).byte(Op.I64Const).i64(BYTES_PER_UNIT_SHIFT).byte(Op.I64ShrU).byte(Op.I32WrapI64);
  w.byte(Op.I32Const).i32(HOST_CALL_FUEL).byte(Op.I32Add).byte(Op.I32Sub).byte(Op.GlobalSet).u32(g.fuel);
  w.byte(Op.GlobalGet).u32(g.fuel).byte(Op.I32Const).i32(0).byte(Op.I32LtS).byte(Op.If).byte(0x40);
  w.byte(Op.GlobalGet).u32(g.fuel).byte(Op.Call).u32(m.refill).byte(Op.GlobalSet).u32(g.fuel).byte(Op.End);
  w.byte(Op.LocalGet).u32(0).byte(Op.Call).u32(alloc).byte(Op.LocalTee).u32(1);
  w.byte(Op.I64Const).i64(48).byte(Op.I64ShrU).byte(Op.I64Const).i64(MAX_CALL_BLOCKS).byte(Op.I64GeU);
  refuse();
  w.byte(Op.LocalGet).u32(1).byte(Op.End);
  return w.toBytes();
}

/**
 * fill_chunked(d, v, n) / copy_chunked(d, s, n): memory.fill / memory.copy in BULK_CHUNK_BYTES chunks,
 * each charged before it runs. One instruction of 60 MB was one stretch nothing could interrupt (it
 * held the host's thread 230 ms in-thread). Out of bounds, the single original instruction runs (it
 * traps before writing anything, as the spec says). A copy to a higher address (d > s) goes from the
 * end, so an overlapping copy moves what memory.copy moves.
 */
function bulkChunkedBody(kind: "fill" | "copy", m: MeterCtx, hasMemory: boolean): Uint8Array {
  const w = new Writer().u32(0);
  // Without a memory there is no memory.fill/copy to rewrite (and memory.size would not validate).
  if (!hasMemory) return w.byte(Op.Unreachable).byte(Op.End).toBytes();
  const C = BULK_CHUNK_BYTES;
  const op = () => (kind === "fill" ? w.byte(Op.Prefix).u32(MEMORY_FILL).byte(0) : w.byte(Op.Prefix).u32(MEMORY_COPY).byte(0).byte(0));
  /** Runs the op on (d, x, n) as they are in the locals, charged. */
  const run = (n: () => void) => {
    w.byte(Op.LocalGet).u32(0).byte(Op.LocalGet).u32(1);
    n();
    w.byte(Op.Call).u32(m.chargeBytes);
    op();
  };
  const whole = () => run(() => w.byte(Op.LocalGet).u32(2));
  /** i64(local) + i64(n) > memory bytes */
  const pastEnd = (local: number) => {
    w.byte(Op.LocalGet).u32(local).byte(Op.I64ExtendI32U).byte(Op.LocalGet).u32(2).byte(Op.I64ExtendI32U).byte(Op.I64Add);
    w.byte(Op.MemorySize).byte(0).byte(Op.I64ExtendI32U).byte(Op.I64Const).i64(16).byte(Op.I64Shl).byte(Op.I64GtU);
  };
  pastEnd(0);
  if (kind === "copy") {
    pastEnd(1);
    w.byte(Op.I32Or);
  }
  w.byte(Op.If).byte(0x40);
  whole();
  w.byte(Op.Return).byte(Op.End);
  const moreThanChunk = () => w.byte(Op.LocalGet).u32(2).byte(Op.I32Const).i32(C).byte(Op.I32GtU);
  const step = (local: number, dir: typeof Op.I32Add | typeof Op.I32Sub) => w.byte(Op.LocalGet).u32(local).byte(Op.I32Const).i32(C).byte(dir).byte(Op.LocalSet).u32(local);
  if (kind === "copy") {
    // Backward: n -= C; copy(d + n, s + n, C), until one chunk is left.
    w.byte(Op.LocalGet).u32(0).byte(Op.LocalGet).u32(1).byte(Op.I32GtU).byte(Op.If).byte(0x40);
    w.byte(Op.Loop).byte(0x40);
    moreThanChunk();
    w.byte(Op.If).byte(0x40);
    step(2, Op.I32Sub);
    w.byte(Op.LocalGet).u32(0).byte(Op.LocalGet).u32(2).byte(Op.I32Add);
    w.byte(Op.LocalGet).u32(1).byte(Op.LocalGet).u32(2).byte(Op.I32Add);
    w.byte(Op.I32Const).i32(C).byte(Op.Call).u32(m.chargeBytes);
    op();
    w.byte(Op.Br).u32(1).byte(Op.End).byte(Op.End);
    whole();
    w.byte(Op.Return).byte(Op.End);
  }
  // Forward: op(d, x, C); d += C (s += C for a copy); n -= C, until one chunk is left.
  w.byte(Op.Loop).byte(0x40);
  moreThanChunk();
  w.byte(Op.If).byte(0x40);
  run(() => w.byte(Op.I32Const).i32(C));
  step(0, Op.I32Add);
  if (kind === "copy") step(1, Op.I32Add);
  step(2, Op.I32Sub);
  w.byte(Op.Br).u32(1).byte(Op.End).byte(Op.End);
  whole();
  return w.byte(Op.End).toBytes();
}

/** A kernel log line crosses to the host's logger (from a worker, as a message): it costs a host call. */
function chargedCallBody(params: number, cost: number, target: number, m: MeterCtx): Uint8Array {
  const w = new Writer().u32(0);
  meterCode(w, cost, m);
  for (let i = 0; i < params; i++) w.byte(Op.LocalGet).u32(i);
  return w.byte(Op.Call).u32(target).byte(Op.End).toBytes();
}

/** Writes every table's maximum: min(existing max, elements); a larger initial size is refused. */
function capTables(sections: Section[], elements: number): void {
  const tables = sections.find((s) => s.id === 4);
  if (!tables) return;
  const r = new Reader(tables.body);
  const n = r.u32();
  const w = new Writer().u32(n);
  for (let i = 0; i < n; i++) {
    if (r.buf[r.pos] === 0x40) throw new InstrumentError("tables with an initializer expression are not supported");
    const refType = valtype(r);
    const flags = r.byte();
    if (flags & ~0x01) throw new InstrumentError("shared or 64-bit tables are not supported");
    const initial = r.u32();
    const max = flags & 0x01 ? Math.min(r.u32(), elements) : elements;
    if (initial > max) throw new InstrumentError(`a table needs ${initial} elements at start, limit is ${max}`);
    w.byte(refType).byte(0x01).u32(initial).u32(max);
  }
  tables.body = w.toBytes();
}

/** Copies one constant expression from `r` to `w`, its ref.func indices through `remap`. */
function copyConstExpr(r: Reader, body: Uint8Array, w: Writer, remap: (i: number) => number): void {
  for (;;) {
    const ins = readInstr(r);
    if (ins.op === Op.RefFunc) w.byte(ins.op).u32(remap(new Reader(body, ins.immStart).u32()));
    else w.raw(body.subarray(ins.start, ins.end));
    if (ins.op === Op.End) return;
  }
}

/** The module's own globals, their initializers remapped (see rewriteGlobals). */
function globalsOf(sections: Section[], remap: (i: number) => number): Uint8Array | undefined {
  const globals = find(sections, 6);
  return globals && rewriteGlobals(globals, remap);
}

/**
 * A global's initializer may name a function (a funcref global): shifted like every other function
 * index, else it would still name the raw kernel `alloc` (no charge, no cap) or, past the added
 * imports, one of the fuel functions (a `begin` refills the budget).
 */
function rewriteGlobals(body: Uint8Array, remap: (i: number) => number): Uint8Array {
  return rewriteVec(body, (r, w) => {
    w.byte(valtype(r)).byte(r.byte());
    copyConstExpr(r, body, w, remap);
  });
}

/** Element segments name functions by index: shift them past the added imports. */
function rewriteElements(body: Uint8Array, remap: (i: number) => number): Uint8Array {
  let entries = 0;
  return rewriteVec(body, (r, w) => {
    const copyExpr = () => copyConstExpr(r, body, w, remap);
    const flags = r.u32();
    w.u32(flags);
    if (flags & 0b010 && !(flags & 0b001)) w.u32(r.u32()); // explicit table index
    if (!(flags & 0b001)) copyExpr(); // active: offset expression
    if (flags & 0b011) w.byte(r.byte()); // elemkind / reftype
    const count = r.u32();
    entries += count;
    if (entries > MAX_ELEMENT_ENTRIES) throw new ModuleShapeError(`module's element segments hold more than ${MAX_ELEMENT_ENTRIES} entries`);
    w.u32(count);
    for (let j = 0; j < count; j++) {
      if (flags & 0b100) copyExpr();
      else w.u32(remap(r.u32()));
    }
  });
}

/** Writes the memory's maximum: min(existing max, pages). */
function capMemory(sections: Section[], pages: number): Uint8Array<ArrayBuffer> {
  const mem = sections.find((s) => s.id === 5);
  if (mem) {
    const r = new Reader(mem.body);
    const count = r.u32();
    if (count !== 1) throw new InstrumentError(`expected one memory, found ${count}`);
    const flags = r.byte();
    if (flags & ~0x01) throw new InstrumentError("shared or 64-bit memory is not supported");
    const initial = r.u32();
    const max = flags & 0x01 ? Math.min(r.u32(), pages) : pages;
    if (initial > max) throw new InstrumentError(`module needs ${initial} memory pages at start, limit is ${max}`);
    mem.body = new Writer().u32(1).byte(0x01).u32(initial).u32(max).toBytes();
  }
  return writeModule(sections);
}
