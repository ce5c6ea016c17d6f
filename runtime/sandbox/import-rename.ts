// Renames an import module in a module's import section. Extism's SDK refuses any module importing
// "wasi_snapshot_preview1" unless its own node:wasi-based WASI is on (useWasi); hookbox serves its
// capability-free WASI (host-api/wasi.ts) under another module name instead.
import { Reader, WasmFormatError, Writer, readSections, writeModule } from "./wasm-binary.ts";

/** `wasm` with every import from module `from` renamed to `to`; the same bytes when there is none. */
export function renameImportModule(wasm: Uint8Array<ArrayBuffer>, from: string, to: string): Uint8Array<ArrayBuffer> {
  if (!WebAssembly.Module.imports(new WebAssembly.Module(wasm)).some((i) => i.module === from)) return wasm;
  const sections = readSections(wasm).map((s) => {
    if (s.id !== 2) return s;
    const r = new Reader(s.body);
    const w = new Writer();
    const n = r.u32();
    w.u32(n);
    for (let i = 0; i < n; i++) {
      const module = r.name();
      w.name(module === from ? to : module).name(r.name());
      const start = r.pos;
      skipImportDesc(r);
      w.raw(s.body.subarray(start, r.pos));
    }
    return { id: 2, body: w.toBytes() };
  });
  return writeModule(sections);
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
