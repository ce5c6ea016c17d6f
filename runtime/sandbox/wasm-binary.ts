// Minimal WebAssembly binary reading/writing: LEB128, sections, and an instruction scanner that
// knows every immediate AssemblyScript (and MVP + bulk-memory + sign-ext + sat-trunc + reference
// types) can emit. Enough to instrument a module without loading a compiler toolchain at run time.
export class WasmFormatError extends Error {
  override name = "WasmFormatError";
}

export class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    start = 0,
    readonly end = buf.length,
  ) {
    this.pos = start;
  }
  get done(): boolean {
    return this.pos >= this.end;
  }
  byte(): number {
    if (this.pos >= this.end) throw new WasmFormatError("unexpected end of module");
    return this.buf[this.pos++]!;
  }
  /** An unsigned LEB of at most 5 bytes and 32 bits (a longer one read as NaN or Infinity, and a count of that looped for ever). */
  u32(): number {
    let result = 0;
    let mul = 1;
    for (let n = 0; n < 5; n++) {
      const b = this.byte();
      result += (b & 0x7f) * mul;
      if ((b & 0x80) === 0) {
        if (result > 0xffff_ffff) throw new WasmFormatError("a u32 beyond 32 bits");
        return result;
      }
      mul *= 128;
    }
    throw new WasmFormatError("a u32 longer than 5 bytes");
  }
  /** Skips a signed LEB (i32/i64/s33 immediates we never need to interpret): at most 10 bytes. */
  skipLeb(): void {
    for (let n = 0; n < 10; n++) if (!(this.byte() & 0x80)) return;
    throw new WasmFormatError("a LEB longer than 10 bytes");
  }
  bytes(n: number): Uint8Array {
    if (this.pos + n > this.end) throw new WasmFormatError("unexpected end of module");
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  name(): string {
    return new TextDecoder().decode(this.bytes(this.u32()));
  }
}

/** Appends bytes to a buffer that doubles as it fills (a number[] per byte made a 4 MiB module cost ~1 s). */
export class Writer {
  private buf: Uint8Array<ArrayBuffer>;
  private len = 0;
  constructor(capacity = 64) {
    this.buf = new Uint8Array(capacity);
  }
  /** Empties the writer, keeping its buffer for the next use. */
  reset(): this {
    this.len = 0;
    return this;
  }
  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.buf.subarray(0, this.len));
    this.buf = grown;
  }
  byte(b: number): this {
    this.room(1);
    this.buf[this.len++] = b;
    return this;
  }
  u32(n: number): this {
    if (!Number.isInteger(n) || n < 0 || n > 0xffff_ffff) throw new WasmFormatError(`not a u32: ${n}`);
    do {
      let b = n & 0x7f;
      n = Math.floor(n / 128);
      if (n !== 0) b |= 0x80;
      this.byte(b);
    } while (n !== 0);
    return this;
  }
  i32(n: number): this {
    for (;;) {
      const b = n & 0x7f;
      n >>= 7;
      const done = (n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0);
      this.byte(done ? b : b | 0x80);
      if (done) return this;
    }
  }
  i64(n: number | bigint): this {
    let v = BigInt(n);
    for (;;) {
      const b = Number(v & 0x7fn);
      v >>= 7n;
      const done = (v === 0n && (b & 0x40) === 0) || (v === -1n && (b & 0x40) !== 0);
      this.byte(done ? b : b | 0x80);
      if (done) return this;
    }
  }
  raw(bytes: ArrayLike<number>): this {
    this.room(bytes.length);
    this.buf.set(bytes, this.len);
    this.len += bytes.length;
    return this;
  }
  name(s: string): this {
    const b = new TextEncoder().encode(s);
    return this.u32(b.length).raw(b);
  }
  /** Appends `inner` prefixed by its byte length. */
  sized(inner: Writer | Uint8Array): this {
    const bytes = inner instanceof Writer ? inner.view() : inner;
    return this.u32(bytes.length).raw(bytes);
  }
  get length(): number {
    return this.len;
  }
  /** The bytes written so far, without a copy (valid until the next write or reset). */
  view(): Uint8Array<ArrayBuffer> {
    return this.buf.subarray(0, this.len);
  }
  toBytes(): Uint8Array<ArrayBuffer> {
    return this.buf.slice(0, this.len);
  }
}

export interface Section {
  id: number;
  /** Payload bytes (without id and size). */
  body: Uint8Array;
}

export function readSections(wasm: Uint8Array): Section[] {
  if (wasm.length < 8 || wasm[0] !== 0 || wasm[1] !== 0x61 || wasm[2] !== 0x73 || wasm[3] !== 0x6d) {
    throw new WasmFormatError("not a WebAssembly module");
  }
  const r = new Reader(wasm, 8);
  const out: Section[] = [];
  while (!r.done) {
    const id = r.byte();
    const size = r.u32();
    out.push({ id, body: r.bytes(size) });
  }
  return out;
}

/** A vector (a count, then the items) rewritten item by item: `item` reads one from `r` and writes its new form to `w`. */
export function rewriteVec(body: Uint8Array, item: (r: Reader, w: Writer) => void): Uint8Array {
  const r = new Reader(body);
  const w = new Writer();
  const n = r.u32();
  w.u32(n);
  for (let i = 0; i < n; i++) item(r, w);
  return w.toBytes();
}

export function writeModule(sections: Section[]): Uint8Array<ArrayBuffer> {
  // Sized up front (id + at most 5 bytes of length per section): one allocation for up to 4 MiB.
  const w = new Writer(8 + sections.reduce((n, s) => n + 6 + s.body.length, 0)).raw([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]);
  for (const s of sections) w.byte(s.id).u32(s.body.length).raw(s.body);
  return w.view();
}

/** Canonical order of known sections (custom sections, id 0, may sit anywhere). */
const ORDER = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 10, 11];
export function sectionRank(id: number): number {
  return ORDER.indexOf(id);
}

export const Op = {
  Block: 0x02,
  Loop: 0x03,
  If: 0x04,
  Else: 0x05,
  End: 0x0b,
  Br: 0x0c,
  Return: 0x0f,
  Call: 0x10,
  ReturnCall: 0x12,
  GlobalGet: 0x23,
  GlobalSet: 0x24,
  LocalGet: 0x20,
  LocalSet: 0x21,
  LocalTee: 0x22,
  I32Eqz: 0x45,
  I32Const: 0x41,
  I64Const: 0x42,
  Unreachable: 0x00,
  I64GtU: 0x56,
  I32Or: 0x72,
  I64Add: 0x7c,
  I64ShrU: 0x88,
  I32WrapI64: 0xa7,
  I32LtS: 0x48,
  I32GtU: 0x4b,
  I32LeU: 0x4d,
  I64GeU: 0x5a,
  I64Shl: 0x86,
  I64ExtendI32U: 0xad,
  I32Add: 0x6a,
  I32Sub: 0x6b,
  I32And: 0x71,
  I32ShrU: 0x76,
  MemorySize: 0x3f,
  MemoryGrow: 0x40,
  RefFunc: 0xd2,
  Prefix: 0xfc,
} as const;

/** One decoded instruction: opcode, where its immediates start, where it ends. */
export interface Instr {
  op: number;
  start: number;
  immStart: number;
  end: number;
}

/** Reads one instruction at r.pos, validating that we know its immediates. */
export function readInstr(r: Reader): Instr {
  const start = r.pos;
  const op = r.byte();
  const immStart = r.pos;
  skipImmediates(r, op);
  return { op, start, immStart, end: r.pos };
}

/** Value types written as one byte: i32, i64, f32, f64, v128, funcref, externref. */
export const SIMPLE_VALTYPES: ReadonlySet<number> = new Set([0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f]);

/**
 * A value type of one byte, else a WasmFormatError: typed references (GC, function references:
 * 0x63/0x64 and a heap type) are longer, and reading them as one byte would take their heap type for
 * the next instruction, so that the meter is written in the wrong places (or not at all).
 */
export function valtype(r: Reader): number {
  const t = r.byte();
  if (!SIMPLE_VALTYPES.has(t)) throw new WasmFormatError(`unsupported value type 0x${t.toString(16)} (typed references / GC are not supported)`);
  return t;
}

function skipBlockType(r: Reader): void {
  const b = r.buf[r.pos]!;
  if (b === 0x40) r.pos++;
  // Any other negative one-byte s33 is a value type; only the simple ones are known.
  else if ((b & 0xc0) === 0x40) valtype(r);
  else r.skipLeb(); // type index (s33, non-negative)
}

/** A memory index that must be 0 (multi-memory is not supported). */
function memoryZero(r: Reader): void {
  if (r.u32() !== 0) throw new WasmFormatError("multi-memory is not supported");
}

/** A memarg: alignment, offset. An alignment with bit 6 set announces a memory index (multi-memory). */
function skipMemarg(r: Reader): void {
  if (r.u32() >= 0x40) throw new WasmFormatError("multi-memory is not supported");
  r.u32();
}

function skipImmediates(r: Reader, op: number): void {
  if (op === 0x02 || op === 0x03 || op === 0x04) return skipBlockType(r);
  if (op <= 0x01 || op === 0x05 || op === 0x0b || op === 0x0f || op === 0x1a || op === 0x1b || op === 0xd1) return;
  if (op === 0x0c || op === 0x0d || op === 0x10 || op === 0x12 || op === 0xd2) return void r.u32();
  if (op === 0x0e) {
    for (let n = r.u32(); n >= 0; n--) r.u32(); // targets + default
    return;
  }
  if (op === 0x11 || op === 0x13) return void (r.u32(), r.u32());
  if (op === 0x1c) {
    for (let n = r.u32(); n > 0; n--) valtype(r);
    return;
  }
  if (op >= 0x20 && op <= 0x26) return void r.u32();
  if (op >= 0x28 && op <= 0x3e) return skipMemarg(r);
  if (op === 0x3f || op === 0x40) return memoryZero(r);
  if (op === 0x41 || op === 0x42) return r.skipLeb();
  if (op === 0x43) return void r.bytes(4);
  if (op === 0x44) return void r.bytes(8);
  if (op >= 0x45 && op <= 0xc4) return;
  if (op === 0xd0) {
    // ref.null's heap type: funcref or externref (an index is a typed reference).
    const t = r.byte();
    if (t !== 0x70 && t !== 0x6f) throw new WasmFormatError(`unsupported heap type 0x${t.toString(16)} (typed references / GC are not supported)`);
    return;
  }
  if (op === 0xfc) return skipPrefixed(r, r.u32());
  throw new WasmFormatError(`unsupported instruction 0x${op.toString(16)} (SIMD, threads and exceptions are not supported)`);
}

function skipPrefixed(r: Reader, sub: number): void {
  if (sub <= 7) return; // saturating truncations
  if (sub === 8) return void (r.u32(), memoryZero(r)); // memory.init data, mem
  if (sub === 9 || sub === 13 || sub === 15 || sub === 16 || sub === 17) return void r.u32();
  if (sub === 10) return void (memoryZero(r), memoryZero(r)); // memory.copy
  if (sub === 11) return memoryZero(r); // memory.fill
  if (sub === 12 || sub === 14) return void (r.u32(), r.u32()); // table.init / table.copy
  throw new WasmFormatError(`unsupported instruction 0xfc ${sub}`);
}
