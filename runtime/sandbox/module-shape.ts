// What a plugin module may declare, checked on its sections before anything reads its code (V8's
// validation included). V8's cost to validate a module grows with what it declares, not with its
// size: blocks and calls of a type with 1,000 parameters and 1,000 results made a 65 KB module take
// 3.5 s and 700 MB to validate on the server's thread (1.4 M of them: 23.7 GB, the process killed).
// Compilers emit far less than these limits; a module beyond one is refused, naming it.
import { Reader, valtype, WasmFormatError, type Section } from "./wasm-binary.ts";

/** Most function types (compilers emit tens to a few hundred). */
export const MAX_TYPES = 10_000;
/** Most parameters and results of one function type (a block typed by it moves as many values). */
export const MAX_TYPE_PARAMS = 128;
export const MAX_TYPE_RESULTS = 16;
/** Most values a block, loop or if typed by a function type takes and leaves (checked per instruction by instrument.ts). */
export const MAX_BLOCK_ARITY = 8;
/** Most imports: hookbox's, the kernel's and WASI's are about 80 functions (each kernel log import gets a shim). */
export const MAX_IMPORTS = 1024;
/**
 * Most exports. A plugin exports its hooks (at most 64), commands, tools (at most 32) and a few
 * runtime functions; each export gets a wrapper, and an export object at every instantiation, on
 * the event loop (100,000 exports: about 1 s to instrument and 0.3 s per instance).
 */
export const MAX_EXPORTS = 4096;
/** Most functions a module defines (each is read, metered and copied; 1,000,000 empty ones held the thread 1.4 s). */
export const MAX_FUNCTIONS = 65_536;
/** Most globals and element segments (each is rewritten, at once, before the code). */
export const MAX_GLOBALS = 65_536;
export const MAX_ELEMENT_SEGMENTS = 4096;
/** Most function references all element segments hold together (a table holds at most 65,536). */
export const MAX_ELEMENT_ENTRIES = 262_144;

/**
 * Most tables a module defines (compilers emit one): each is allocated at its initial size at every
 * instantiation, up to TABLE_ELEMENTS (instrument.ts); 1,000 tables held the thread 7 s and 1.9 GB.
 */
export const MAX_TABLES = 8;
/**
 * Most locals all function bodies declare together (compilers emit about one per 100-200 bytes of
 * code: the shipped plugins 20-180 in all, a 4 MiB module some 40,000). V8 compiled a function on
 * its first call, on the calling thread (now at the module's compile: eager-compile.ts), in time
 * that grows with its locals, which cost no fuel
 * there: 1,000 functions of 50,000 locals (a 16 KB module) held the server's thread 9-14 s on a
 * first call that ran 5,000 instructions.
 */
export const MAX_LOCALS = 200_000;
/** Longest import module or name (hookbox's own are under 40 characters; an error message quotes it). */
export const MAX_IMPORT_NAME_CHARS = 256;

/** [parameter count, result types] of every function type. */
export type Signatures = Array<[number, number[]]>;

/** A module beyond one of the limits above. */
export class ModuleShapeError extends Error {
  override name = "ModuleShapeError";
}

/**
 * Checks the module's sections against the limits above, first the counts, then each function
 * type (read once here: a lookup per export that decoded the whole section again made types x
 * exports of work, minutes for a 1.5 MB module). Returns the signatures; throws ModuleShapeError
 * for a limit passed, WasmFormatError for a form it does not know.
 */
export function checkShape(sections: readonly Section[]): Signatures {
  const count = (id: number) => {
    const body = sections.find((s) => s.id === id)?.body;
    return body ? new Reader(body).u32() : 0;
  };
  const limit = (what: string, n: number, max: number) => {
    if (n > max) throw new ModuleShapeError(`module has ${n} ${what}, limit is ${max}`);
  };
  limit("function types", count(1), MAX_TYPES);
  limit("imports", count(2), MAX_IMPORTS);
  limit("exports", count(7), MAX_EXPORTS);
  limit("functions", count(3), MAX_FUNCTIONS);
  limit("globals", count(6), MAX_GLOBALS);
  limit("element segments", count(9), MAX_ELEMENT_SEGMENTS);
  limit("tables", count(4), MAX_TABLES);
  const body = sections.find((s) => s.id === 1)?.body;
  const out: Signatures = [];
  if (!body) return out;
  const r = new Reader(body);
  for (let n = r.u32(); n > 0; n--) {
    if (r.byte() !== 0x60) throw new WasmFormatError("unsupported type form");
    const params = r.u32();
    limit("parameters in a function type", params, MAX_TYPE_PARAMS);
    for (let i = 0; i < params; i++) valtype(r);
    const results = r.u32();
    limit("results in a function type", results, MAX_TYPE_RESULTS);
    const types: number[] = [];
    for (let i = 0; i < results; i++) types.push(valtype(r));
    out.push([params, types]);
  }
  return out;
}
