// A light JSON reader over the raw UTF-8 input: finds one field of an object by scanning, without
// building a DOM (the full parse dominated call time). Values it does not need are skipped, so
// unknown fields and nesting cost a scan, never an allocation. Malformed input yields "absent"
// (-1 / null), never a trap. Offsets are byte indexes into `buf`; 0 means "the root object".

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

// @ts-ignore: decorator
@inline function at(buf: Uint8Array, i: i32): i32 {
  return <i32>load<u8>(buf.dataStart + <usize>i);
}

// @ts-ignore: decorator
@inline function put16(o: usize, u: i32, c: i32): void {
  store<u16>(o + (<usize>u << 1), <u16>c);
}

export function skipWs(buf: Uint8Array, i: i32): i32 {
  const n = buf.length;
  while (i < n) {
    const c = at(buf, i);
    if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) break;
    i++;
  }
  return i;
}

/**
 * `i` at an opening quote; returns the index after the closing quote, or -1. Eight bytes at a time
 * up to the next '"' or '\\' (a word test per 8 bytes, not a test per byte): a 10,000-id list is
 * 300 KB that each cleaning plugin skips over.
 */
export function skipString(buf: Uint8Array, i: i32): i32 {
  const n = buf.length;
  const base = buf.dataStart;
  i++;
  while (i < n) {
    while (i + 8 <= n) {
      const v = load<u64>(base + <usize>i);
      const q = v ^ 0x2222222222222222;
      const b = v ^ 0x5c5c5c5c5c5c5c5c;
      // High bit of each byte that is zero in q or b (exact for the lowest such byte).
      const m = ((q - 0x0101010101010101) & ~q & 0x8080808080808080) | ((b - 0x0101010101010101) & ~b & 0x8080808080808080);
      if (m != 0) {
        i += <i32>(ctz(m) >> 3);
        break;
      }
      i += 8;
    }
    if (i >= n) break;
    const c = at(buf, i);
    if (c == QUOTE) return i + 1;
    i += c == BACKSLASH ? 2 : 1;
  }
  return -1;
}

/** Skips the value starting at `i` (whitespace allowed); returns the index after it, or -1. */
export function skipValue(buf: Uint8Array, i: i32): i32 {
  const n = buf.length;
  i = skipWs(buf, i);
  if (i >= n) return -1;
  let c = at(buf, i);
  if (c == QUOTE) return skipString(buf, i);
  if (c == LBRACE || c == LBRACKET) {
    let depth = 0;
    while (i < n) {
      c = at(buf, i);
      if (c == QUOTE) {
        i = skipString(buf, i);
        if (i < 0) return -1;
        continue;
      }
      if (c == LBRACE || c == LBRACKET) depth++;
      else if (c == RBRACE || c == RBRACKET) {
        if (--depth == 0) return i + 1;
      }
      i++;
    }
    return -1;
  }
  const start = i;
  while (i < n) {
    c = at(buf, i);
    if (c == COMMA || c == RBRACE || c == RBRACKET || c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09) break;
    i++;
  }
  return i > start ? i : -1;
}

/** Whether the raw key between quotes [s, e) equals `key` (escaped or non-ASCII keys get decoded). */
function keyEquals(buf: Uint8Array, s: i32, e: i32, key: string): bool {
  for (let j = s; j < e; j++) {
    const c = at(buf, j);
    if (c >= 0x80 || c == BACKSLASH) {
      const decoded = decodeString(buf, s - 1);
      return decoded !== null && decoded == key;
    }
  }
  const len = e - s;
  if (len != key.length) return false;
  for (let j = 0; j < len; j++) {
    if (at(buf, s + j) != <i32>key.charCodeAt(j)) return false;
  }
  return true;
}

/** Offset of the value of `key` in the object at `obj`, or -1 (missing key, not an object). */
export function findField(buf: Uint8Array, key: string, obj: i32 = 0): i32 {
  const n = buf.length;
  let i = skipWs(buf, obj);
  if (i >= n || at(buf, i) != LBRACE) return -1;
  i++;
  while (true) {
    i = skipWs(buf, i);
    if (i >= n || at(buf, i) != QUOTE) return -1;
    const ks = i;
    i = skipString(buf, i);
    if (i < 0) return -1;
    const match = keyEquals(buf, ks + 1, i - 1, key);
    i = skipWs(buf, i);
    if (i >= n || at(buf, i) != COLON) return -1;
    i = skipWs(buf, i + 1);
    if (match) return i < n ? i : -1;
    i = skipValue(buf, i);
    if (i < 0) return -1;
    i = skipWs(buf, i);
    if (i >= n || at(buf, i) != COMMA) return -1;
    i++;
  }
}

/** Decodes the JSON string whose opening quote is at `i`; null when `i` is not a valid string. */
export function decodeString(buf: Uint8Array, i: i32): string | null {
  if (i < 0 || i >= buf.length || at(buf, i) != QUOTE) return null;
  const end = skipString(buf, i);
  if (end < 0) return null;
  const s = i + 1;
  const e = end - 1;
  let plain = true;
  for (let j = s; j < e; j++) {
    if (at(buf, j) == BACKSLASH) {
      plain = false;
      break;
    }
  }
  if (plain) return String.UTF8.decodeUnsafe(buf.dataStart + <usize>s, <usize>(e - s));
  // Every input byte yields at most one UTF-16 unit (a 4-byte sequence yields two).
  const out = new ArrayBuffer((e - s) << 1);
  const o = changetype<usize>(out);
  let u = 0;
  let j = s;
  while (j < e) {
    let c = at(buf, j);
    if (c == BACKSLASH) {
      if (j + 1 >= e) return null;
      const x = at(buf, j + 1);
      j += 2;
      if (x == 0x75) {
        // \uXXXX: surrogate pairs arrive as two escapes and are stored unit by unit.
        if (j + 4 > e) return null;
        let cp = 0;
        for (let k = 0; k < 4; k++) {
          const h = hexValue(at(buf, j + k));
          if (h < 0) return null;
          cp = (cp << 4) | h;
        }
        j += 4;
        c = cp;
      } else if (x == 0x6e) c = 0x0a;
      else if (x == 0x74) c = 0x09;
      else if (x == 0x72) c = 0x0d;
      else if (x == 0x62) c = 0x08;
      else if (x == 0x66) c = 0x0c;
      else if (x == QUOTE || x == BACKSLASH || x == 0x2f) c = x;
      else return null;
      put16(o, u++, <u16>c);
      continue;
    }
    j++;
    if (c >= 0x80) {
      let cp = 0xfffd;
      if ((c & 0xe0) == 0xc0 && j < e) {
        cp = ((c & 0x1f) << 6) | (at(buf, j) & 0x3f);
        j += 1;
      } else if ((c & 0xf0) == 0xe0 && j + 1 < e) {
        cp = ((c & 0x0f) << 12) | ((at(buf, j) & 0x3f) << 6) | (at(buf, j + 1) & 0x3f);
        j += 2;
      } else if ((c & 0xf8) == 0xf0 && j + 2 < e) {
        cp = ((c & 0x07) << 18) | ((at(buf, j) & 0x3f) << 12) | ((at(buf, j + 1) & 0x3f) << 6) | (at(buf, j + 2) & 0x3f);
        j += 3;
      }
      if (cp >= 0x10000) {
        cp -= 0x10000;
        put16(o, u++, <u16>(0xd800 | (cp >> 10)));
        c = 0xdc00 | (cp & 0x3ff);
      } else c = cp;
    }
    put16(o, u++, <u16>c);
  }
  return String.UTF16.decodeUnsafe(o, <usize>u << 1);
}

function hexValue(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/** A top-level (or `obj`-level) string field; null when missing, null-valued or not a string. */
export function getString(buf: Uint8Array, key: string, obj: i32 = 0): string | null {
  return decodeString(buf, findField(buf, key, obj));
}

/** A number field; `fallback` when missing or not a number. */
export function getNumber(buf: Uint8Array, key: string, fallback: f64, obj: i32 = 0): f64 {
  const i = findField(buf, key, obj);
  if (i < 0) return fallback;
  const c = at(buf, i);
  if (c != 0x2d && (c < 0x30 || c > 0x39)) return fallback;
  const end = skipValue(buf, i);
  if (end < 0) return fallback;
  const v = F64.parseFloat(String.UTF8.decodeUnsafe(buf.dataStart + <usize>i, <usize>(end - i)));
  return isNaN(v) ? fallback : v;
}

/** Offset of an object-valued field (to read its fields with `obj`), or -1. */
export function getObject(buf: Uint8Array, key: string, obj: i32 = 0): i32 {
  const i = findField(buf, key, obj);
  return i >= 0 && at(buf, i) == LBRACE ? i : -1;
}

/** The raw JSON text of a field (any type), or null when missing. */
export function getRaw(buf: Uint8Array, key: string, obj: i32 = 0): string | null {
  const i = findField(buf, key, obj);
  if (i < 0) return null;
  const end = skipValue(buf, i);
  if (end < 0) return null;
  return String.UTF8.decodeUnsafe(buf.dataStart + <usize>i, <usize>(end - i));
}

/** The string elements of an array (at `i`, e.g. from findField); null when not an array. */
export function decodeStringArray(buf: Uint8Array, i: i32): string[] | null {
  const n = buf.length;
  if (i < 0 || i >= n || at(buf, i) != LBRACKET) return null;
  const out = new Array<string>();
  i = skipWs(buf, i + 1);
  if (i < n && at(buf, i) == RBRACKET) return out;
  while (i < n) {
    i = skipWs(buf, i);
    const end = skipValue(buf, i);
    if (end < 0) return null;
    const s = decodeString(buf, i); // non-string elements are skipped
    if (s !== null) out.push(s);
    i = skipWs(buf, end);
    if (i >= n) return null;
    const c = at(buf, i);
    if (c == RBRACKET) return out;
    if (c != COMMA) return null;
    i++;
  }
  return null;
}

/** An array-of-strings field; null when missing or not an array. */
export function getStringArray(buf: Uint8Array, key: string, obj: i32 = 0): string[] | null {
  return decodeStringArray(buf, findField(buf, key, obj));
}

/**
 * How JSON writes the UTF-16 unit `c` inside a string: 0 as it is, 0x75 ('u') as \u00XX, else the
 * character that follows a backslash.
 */
export function escapeOf(c: i32): i32 {
  if (c == QUOTE || c == BACKSLASH) return c;
  if (c >= 0x20) return 0;
  if (c == 0x0a) return 0x6e;
  if (c == 0x0d) return 0x72;
  if (c == 0x09) return 0x74;
  if (c == 0x08) return 0x62;
  if (c == 0x0c) return 0x66;
  return 0x75;
}

/** `s` as a JSON string literal, quotes included. */
export function quote(s: string): string {
  const n = s.length;
  let extra = 0;
  for (let j = 0; j < n; j++) {
    const esc = escapeOf(s.charCodeAt(j));
    if (esc != 0) extra += esc == 0x75 ? 5 : 1;
  }
  if (extra == 0) return '"' + s + '"';
  const out = new ArrayBuffer((n + extra + 2) << 1);
  const o = changetype<usize>(out);
  let u = 0;
  put16(o, u++, QUOTE);
  for (let j = 0; j < n; j++) {
    const c = <i32>s.charCodeAt(j);
    const esc = escapeOf(c);
    if (esc == 0) {
      put16(o, u++, <u16>c);
      continue;
    }
    put16(o, u++, BACKSLASH);
    put16(o, u++, <u16>esc);
    if (esc == 0x75) {
      put16(o, u++, 0x30);
      put16(o, u++, 0x30);
      put16(o, u++, <u16>hexDigit(c >> 4));
      put16(o, u++, <u16>hexDigit(c & 15));
    }
  }
  put16(o, u++, QUOTE);
  return String.UTF16.decodeUnsafe(o, <usize>u << 1);
}

export function hexDigit(d: i32): i32 {
  return d < 10 ? 0x30 + d : 0x57 + d;
}

/** `items` as a JSON array of strings. */
export function quoteArray(items: string[]): string {
  let s = "[";
  for (let j = 0; j < items.length; j++) {
    if (j > 0) s += ",";
    s += quote(items[j]);
  }
  return s + "]";
}

/** UTF-8 bytes of a string, for reading JSON held in a string (e.g. a KV value). */
export function bytesOf(s: string): Uint8Array {
  return Uint8Array.wrap(String.UTF8.encode(s));
}
