// Byte-level helpers for large inputs and outputs under the stub runtime (no GC: nothing is freed
// before the call ends). Decoding 10,000 session ids into strings, building a Set of prefixed keys
// and concatenating an output with `+=` each keep every intermediate copy, and ran a 64-page plugin
// out of memory. These work on slices of the bytes the plugin already holds instead:
//   StringCursor walks a JSON array of strings and yields each element as a raw [start, end) slice,
//   SliceSet is a hash set of such slices (no copies), ByteWriter builds an output or a KV value in
//   one growing buffer (at most twice the final size).
// Slices are raw JSON string contents (escapes not decoded): two slices produced by the same JSON
// encoder (the host's JSON.stringify) compare equal exactly when the strings are equal.
import { escapeOf, hexDigit, skipString, skipValue, skipWs } from "./json";
import { outputRaw } from "./mem";

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;

// @ts-ignore: decorator
@inline function at(buf: Uint8Array, i: i32): i32 {
  return <i32>load<u8>(buf.dataStart + <usize>i);
}

/** Walks the string elements of the JSON array at `arrayAt` (non-strings are skipped). */
export class StringCursor {
  private i: i32;
  /** The current element's raw content: buf[start, end), quotes excluded. */
  start: i32 = 0;
  end: i32 = 0;

  constructor(readonly buf: Uint8Array, arrayAt: i32) {
    this.i = arrayAt >= 0 && arrayAt < buf.length && at(buf, arrayAt) == LBRACKET ? arrayAt + 1 : buf.length;
  }

  /** Moves to the next string element; false at the end of the array (or on malformed input). */
  next(): bool {
    const buf = this.buf;
    const n = buf.length;
    while (true) {
      let i = skipWs(buf, this.i);
      if (i >= n || at(buf, i) == RBRACKET) {
        this.i = n;
        return false;
      }
      const isString = at(buf, i) == QUOTE;
      const end = isString ? skipString(buf, i) : skipValue(buf, i);
      if (end < 0) {
        this.i = n;
        return false;
      }
      this.start = i + 1;
      this.end = end - 1;
      i = skipWs(buf, end);
      this.i = i < n && at(buf, i) == COMMA ? i + 1 : i;
      if (isString) return true;
    }
  }

  /** Whether the current element has escapes (its raw bytes are not the string itself). */
  escaped(): bool {
    for (let j = this.start; j < this.end; j++) if (at(this.buf, j) == BACKSLASH) return true;
    return false;
  }
}

/** How many string elements the JSON array at `arrayAt` has. */
export function countStrings(buf: Uint8Array, arrayAt: i32): i32 {
  const c = new StringCursor(buf, arrayAt);
  let n = 0;
  while (c.next()) n++;
  return n;
}

function hashSlice(buf: Uint8Array, s: i32, e: i32): u32 {
  let h: u32 = 2166136261;
  for (let j = s; j < e; j++) h = (h ^ <u32>at(buf, j)) * 16777619;
  return h;
}

function sliceEquals(a: Uint8Array, as: i32, ae: i32, b: Uint8Array, bs: i32, be: i32): bool {
  const n = ae - as;
  if (n != be - bs) return false;
  return memory.compare(a.dataStart + <usize>as, b.dataStart + <usize>bs, <usize>n) == 0;
}

/** A set of slices of one buffer (open addressing; holds offsets, never copies). */
export class SliceSet {
  private readonly starts: StaticArray<i32>;
  private readonly ends: StaticArray<i32>;
  private readonly mask: i32;

  constructor(readonly buf: Uint8Array, capacity: i32) {
    let size = 16;
    while (size < capacity * 2) size <<= 1;
    this.starts = new StaticArray<i32>(size);
    this.ends = new StaticArray<i32>(size);
    for (let j = 0; j < size; j++) this.starts[j] = -1;
    this.mask = size - 1;
  }

  /** Every string element of the JSON array at `arrayAt` in `buf`. */
  static ofArray(buf: Uint8Array, arrayAt: i32): SliceSet {
    const set = new SliceSet(buf, countStrings(buf, arrayAt));
    const c = new StringCursor(buf, arrayAt);
    while (c.next()) set.add(c.start, c.end);
    return set;
  }

  add(s: i32, e: i32): void {
    let j = <i32>hashSlice(this.buf, s, e) & this.mask;
    while (this.starts[j] >= 0) {
      if (sliceEquals(this.buf, this.starts[j], this.ends[j], this.buf, s, e)) return;
      j = (j + 1) & this.mask;
    }
    this.starts[j] = s;
    this.ends[j] = e;
  }

  /** Whether `other[s, e)` is in the set. */
  has(other: Uint8Array, s: i32, e: i32): bool {
    let j = <i32>hashSlice(other, s, e) & this.mask;
    while (this.starts[j] >= 0) {
      if (sliceEquals(this.buf, this.starts[j], this.ends[j], other, s, e)) return true;
      j = (j + 1) & this.mask;
    }
    return false;
  }
}

/** Builds bytes in one buffer that doubles when full (no string concatenation). */
export class ByteWriter {
  buf: Uint8Array;
  length: i32 = 0;

  constructor(capacity: i32 = 256) {
    this.buf = new Uint8Array(max(capacity, 16));
  }

  private reserve(n: i32): void {
    if (this.length + n <= this.buf.length) return;
    let cap = this.buf.length << 1;
    while (cap < this.length + n) cap <<= 1;
    const next = new Uint8Array(cap);
    memory.copy(next.dataStart, this.buf.dataStart, <usize>this.length);
    this.buf = next;
  }

  /** Appends src[s, e). */
  slice(src: Uint8Array, s: i32, e: i32): ByteWriter {
    const n = e - s;
    this.reserve(n);
    memory.copy(this.buf.dataStart + <usize>this.length, src.dataStart + <usize>s, <usize>n);
    this.length += n;
    return this;
  }

  /** Appends `s` as UTF-8. */
  text(s: string): ByteWriter {
    const n = String.UTF8.byteLength(s);
    this.reserve(n);
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, this.buf.dataStart + <usize>this.length);
    this.length += n;
    return this;
  }

  /**
   * Appends s[start, end) as the inside of a JSON string (quotes, backslashes and control
   * characters escaped), straight from the string's memory: no substring, no quoted copy.
   */
  escaped(s: string, start: i32, end: i32): ByteWriter {
    let run = start;
    for (let i = start; i <= end; i++) {
      const c = i < end ? <i32>s.charCodeAt(i) : 0;
      const esc = i < end ? escapeOf(c) : -1;
      if (esc == 0) continue;
      if (i > run) {
        // A run ends at an ASCII character or the end: it never splits a surrogate pair.
        this.reserve((i - run) * 3);
        this.length += <i32>String.UTF8.encodeUnsafe(changetype<usize>(s) + (<usize>run << 1), i - run, this.buf.dataStart + <usize>this.length);
      }
      if (esc > 0) {
        this.reserve(6);
        const at = this.buf.dataStart + <usize>this.length;
        store<u8>(at, 0x5c);
        store<u8>(at, <u8>esc, 1);
        this.length += 2;
        if (esc == 0x75) {
          store<u8>(at, 0x30, 2);
          store<u8>(at, 0x30, 3);
          store<u8>(at, <u8>hexDigit(c >> 4), 4);
          store<u8>(at, <u8>hexDigit(c & 15), 5);
          this.length += 4;
        }
      }
      run = i + 1;
    }
    return this;
  }

  int(v: i64): ByteWriter {
    return this.text(v.toString());
  }

  reset(): void {
    this.length = 0;
  }

  /** Sets the call's output to the bytes written. */
  output(): void {
    outputRaw(this.buf.dataStart, this.length);
  }
}
