// Adapts a module built by a WASI toolchain to hookbox's sandbox, at the byte level:
// - its "wasi_snapshot_preview1" imports are renamed to `to`: Extism's SDK refuses that module name
//   unless its own node:wasi-based WASI is on (useWasi); hookbox serves its capability-free WASI
//   (host-api/wasi.ts) under another name instead;
// - a reactor's `_initialize` export is renamed to INITIALIZE_EXPORT: Extism would run
//   `_initialize` inside createPlugin, before the sandbox can hand WASI the instance's memory (libc
//   start-up reads its environment through WASI and exits when that fails); the sandbox runs it
//   right after, under the plugin's limits.
import { Reader, WasmFormatError, readSections, rewriteVec, writeModule, type Section } from "./wasm-binary.ts";

export const INITIALIZE_EXPORT = "hookbox_initialize";

/** `wasm` adapted as above; the same bytes when it imports nothing from `from`. */
export function adaptWasiModule(wasm: Uint8Array<ArrayBuffer>, from: string, to: string): Uint8Array<ArrayBuffer> {
  const sections = readSections(wasm);
  const imports = sections.find((s) => s.id === 2);
  const renamed = imports && renameImports(imports.body, from, to);
  if (!renamed) return wasm;
  return writeModule(
    sections.map((s): Section => {
      if (s.id === 2) return { id: 2, body: renamed };
      if (s.id === 7) return { id: 7, body: renameExport(s.body, "_initialize", INITIALIZE_EXPORT) };
      return s;
    }),
  );
}

/** The import section with module `from` renamed to `to`; undefined when no import is from `from`. */
function renameImports(body: Uint8Array, from: string, to: string): Uint8Array | undefined {
  let renamed = false;
  const out = rewriteVec(body, (r, w) => {
    const module = r.name();
    renamed ||= module === from;
    w.name(module === from ? to : module).name(r.name());
    const start = r.pos;
    skipImportDesc(r);
    w.raw(body.subarray(start, r.pos));
  });
  return renamed ? out : undefined;
}

function renameExport(body: Uint8Array, from: string, to: string): Uint8Array {
  return rewriteVec(body, (r, w) => {
    const name = r.name();
    w.name(name === from ? to : name).byte(r.byte()).u32(r.u32());
  });
}

function skipImportDesc(r: Reader): void {
  const kind = r.byte();
  if (kind === 0x00) return void r.u32(); // function: type index
  if (kind === 0x01) r.byte(); // table: element type, then limits
  if (kind === 0x01 || kind === 0x02) {
    const flags = r.byte();
    r.u32();
    if (flags & 1) r.u32();
    return;
  }
  if (kind === 0x03) return void (r.byte(), r.byte()); // global: type, mutability
  throw new WasmFormatError(`unsupported import kind ${kind}`);
}
