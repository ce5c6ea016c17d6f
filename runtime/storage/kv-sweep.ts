// A staged sweep (host-api/kv.ts KvSweep: the keys `prefix + id`, or `prefix + id + ":" + suffix`,
// of a list of session ids) as SQL: the rows it matches, and its delete at commit.
// On the embedded file the delete reads the matched keys in the commit's transaction and deletes
// them by key range: a bulk delete's ids are mostly neighbours in key order (10,000 of 10,000, or
// the 1,000 oldest), and a range delete costs about a sixth of one primary-key seek per key, which
// SQLite also makes two-pass when the key list comes from a subquery. Ids scattered among keys that
// stay are deleted by their key list; a range holding many more keys than the ids could match is
// not read at all (the set-based SQL a server runs instead).
import type { KvSweep } from "../../host-api/kv.ts";
import type { BatchConnection, ReadingStep } from "./file-batch.ts";
import { ROW_BYTES, USAGE_OFF_COUNTED_SQL, usageOffSql } from "./kv-usage.ts";

/**
 * `key` is `prefix + id + ":" + suffix` with no further ':' (the id ends at the key's last ':'), as
 * SQL over the three expressions: one range seek on the primary key, then the check of the suffix.
 */
export const keyOfIdPrefix = (key: string, prefix: string, id: string) =>
  `${key} >= ${prefix} || ${id} || ':' and ${key} < ${prefix} || ${id} || ';' and instr(substr(${key}, length(${prefix} || ${id}) + 2), ':') = 0`;

// The rows a sweep matches (?1 plugin, ?2 scope, ?3 prefix, ?4 ids JSON), one primary key seek per
// id: `prefix || id`, or the key range [prefix || id || ':', prefix || id || ';') with no further
// ':'. CROSS JOIN keeps json_each outside, so each id's range is a seek; the planner otherwise scans
// the ids once per stored key.
const sweepRowsOf = (ids: string, columns = "k.key") => ({
  exact: `select ${columns} from ${ids} j cross join plugin_kv k
    where k.plugin = ?1 and k.session_id = ?2 and k.key = ?3 || j.value`,
  byIdPrefix: `select ${columns}, j.value as id from ${ids} j cross join plugin_kv k
    where j.value <> '' and k.plugin = ?1 and k.session_id = ?2
      and ${keyOfIdPrefix("k.key", "?3", "j.value")}`,
});
const SWEEP_ROWS = sweepRowsOf("json_each(?4)");
/** The ids, an id the plugin listed twice taken once: for counts (its keys must not count twice). */
const DISTINCT_IDS = "(select distinct value from json_each(?4))";
export const DISTINCT_SWEEP_ROWS = sweepRowsOf(DISTINCT_IDS);
export const sweepRows = (sweep: KvSweep, rows = SWEEP_ROWS) => (sweep.byIdPrefix ? rows.byIdPrefix : rows.exact);
export const sweepArgs = (plugin: string, sweep: KvSweep) => [plugin, sweep.session, sweep.prefix, sweep.idsJson];

// The set-based delete (a server's, and the file's when the range read would be too long): usage
// first, over each matched row once, then the rows. An exact sweep's keys are known without reading
// them: one seek per id, where a range sweep's key list is read first.
const COUNTED_ROWS = sweepRowsOf(DISTINCT_IDS, "k.plugin, k.key, k.value");
const USAGE_OFF_SQL = {
  exact: usageOffSql(`from (${COUNTED_ROWS.exact}) k`),
  byIdPrefix: usageOffSql(`from (${COUNTED_ROWS.byIdPrefix}) k`),
};
const DELETE_SQL = {
  exact: `delete from plugin_kv where plugin = ?1 and session_id = ?2 and key in (select ?3 || value from json_each(?4))`,
  byIdPrefix: `delete from plugin_kv where plugin = ?1 and session_id = ?2 and key in (select key from (${SWEEP_ROWS.byIdPrefix}))`,
};
const setBased = (plugin: string, sweep: KvSweep) => {
  const mode = sweep.byIdPrefix ? "byIdPrefix" : "exact";
  const args = sweepArgs(plugin, sweep);
  return [
    { sql: USAGE_OFF_SQL[mode], args },
    { sql: DELETE_SQL[mode], args },
  ] as const;
};

/** The scope's keys in [?3, ?4], in key order, at most ?`limit` of them. */
const rangeOf = (limit: number) => `from plugin_kv where plugin = ?1 and session_id = ?2 and key >= ?3 and key <= ?4 order by key limit ?${limit}`;
/**
 * `value` over those keys, or null when they hold more than ?`budget` bytes, told by a pass over
 * their lengths first (octet_length reads a row's header only): a bound by their count alone let
 * 100,000 keys of 512 escaped characters make a 300 MB text (4.5 s on the server's thread).
 */
const withinBytes = (limit: number, budget: number, value: string) =>
  `select case when (select coalesce(sum(octet_length(key)), 0) from (select key ${rangeOf(limit)})) > ?${budget} then null else (${value}) end`;
// Those keys with their bytes as ONE JSON text (thousands of rows as JS values cost more than reading them).
const RANGE_ROWS_SQL = withinBytes(5, 6, `select json_group_array(json_array(key, b)) from (select key, ${ROW_BYTES("plugin_kv")} as b ${rangeOf(5)})`);
// One run of matched keys, [?3, ?4]: no other key lies between them (read in this transaction).
const RANGE_DELETE_SQL = `delete from plugin_kv where plugin = ?1 and session_id = ?2 and key >= ?3 and key <= ?4`;
/** Keys ?3 (a JSON array of distinct keys) of plugin ?1's scope ?2. */
export const KEYS_DELETE_SQL = `delete from plugin_kv where plugin = ?1 and session_id = ?2 and key in (select value from json_each(?3))`;

/** Keys read per id at most (an exact sweep matches one per id); past it the range is left unread. */
const KEYS_READ_PER_ID = 8;
/** At most this many keys are read in one range. */
const KEYS_READ_MAX = 100_000;
/** And at most this many bytes of them (as JSON at most 6x: a control character is escaped as \u0001). */
const KEYS_READ_BYTES = 2 * 1024 * 1024;

// JS orders strings as SQLite's BINARY collation does below U+D800 (UTF-16 units, code points and
// UTF-8 bytes agree there): the whole-range check, which sorts the ids in JS, needs ids without a
// character past it, raw or escaped in the JSON.
const OUT_OF_ORDER = /[\ud800-\uffff]|\\u[d-fD-F]/;


/** a < b as SQLite's BINARY collation orders their UTF-8 (code point order), for well-formed strings. */
function utf8Less(a: string, b: string): boolean {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) < codePointRank(y);
  }
  return a.length < b.length;
}
/** A UTF-16 unit's place in code point order: a surrogate (of a pair: U+10000 and up) after U+E000-U+FFFF. */
const codePointRank = (u: number) => (u >= 0xd800 && u <= 0xdfff ? u + 0x2000 : u >= 0xe000 ? u - 0x800 : u);

/**
 * [first, last] key a matched key can be, or undefined when no id can match: mode 1 skips "", and
 * an id that is not well-formed UTF-16 (a lone surrogate, from an escape in the plugin's JSON)
 * matches no stored key. Found in JS: SQL handing back a bound made of such an id would give the
 * native driver bytes that are not UTF-8, which aborts the process.
 */
function boundsOf(sweep: KvSweep): [string, string] | undefined {
  const { prefix } = sweep;
  let lo: string | undefined;
  let hi: string | undefined;
  for (const id of sweep.ids) {
    if ((sweep.byIdPrefix && id === "") || !id.isWellFormed()) continue;
    const first = sweep.byIdPrefix ? prefix + id + ":" : prefix + id;
    const last = sweep.byIdPrefix ? prefix + id + ";" : first;
    if (lo === undefined || utf8Less(first, lo)) lo = first;
    if (hi === undefined || utf8Less(hi, last)) hi = last;
  }
  return lo === undefined ? undefined : [lo, hi!];
}

// The scope's keys in [?3, ?4] (at most ?5): their number, bytes, and the keys themselves as one
// JSON array (no per-key sizes: a range that holds only matched keys needs their total alone).
const RANGE_KEYS_SQL = withinBytes(
  5,
  6,
  `select json_array(count(*), coalesce(sum(b), 0), coalesce(json_group_array(key), '[]')) from (select key, ${ROW_BYTES("plugin_kv")} as b ${rangeOf(5)})`,
);

/**
 * A sweep (ids in JS order) whose range, from its first id's keys to its last id's, holds only keys
 * it matches (a bulk delete's neighbouring ids, each indexed): told, for an exact sweep, by
 * comparing the range with its keys in SQL; otherwise (or when that fails: an id with no key) by one
 * read of the range's keys walked against the sorted ids once (no per-key sizes, no Set). Deleted
 * by one range. Undefined when it is not so.
 */
function wholeRange(conn: BatchConnection, plugin: string, sweep: KvSweep, most: number): number | undefined {
  const { prefix, byIdPrefix } = sweep;
  const list = listInOrder(sweep);
  const ids = byIdPrefix ? list.byIdPrefix : list.exact;
  if (ids.length === 0) return 0;
  const [lo, hi] = byIdPrefix ? (list.bounds ??= idPrefixBounds(ids)) : [ids[0]!, ids[ids.length - 1]!];
  const range = [plugin, sweep.session, prefix + lo, prefix + hi] as const;
  if (!byIdPrefix) {
    const gone = exactlyTheirs(conn, range, prefix, list);
    if (gone !== undefined) return gone;
  }
  // An exact sweep matches at most one key per id: a range holding more is not whole.
  const limit = byIdPrefix ? most : ids.length;
  const text = conn.all(RANGE_KEYS_SQL, [...range, limit + 1, KEYS_READ_BYTES])[0]?.[0];
  if (text == null) return undefined;
  const [n, bytes, keys] = JSON.parse(String(text)) as [number, number, string[]];
  if (n === 0) return 0;
  if (n > limit) return undefined;
  // Keys come in key order and the ids in the same order (every key of the range starts with the
  // prefix its bounds share): each key's id is the current id or a later one. A key of no id, or
  // one out of that order, leaves the sweep to the general path. By id prefix, a key with no ':'
  // past the prefix is no id's (lastIndexOf -1 would make slice cut its last character instead).
  let j = 0;
  for (const key of keys) {
    const end = byIdPrefix ? key.lastIndexOf(":") : key.length;
    if (end <= prefix.length && byIdPrefix) return undefined;
    const id = key.slice(prefix.length, end);
    while (j < ids.length && ids[j]! < id) j++;
    if (ids[j] !== id) return undefined;
  }
  return rangeGone(conn, range, n, bytes);
}

/** Deletes the range, which holds `n` keys of `bytes` (all matched), and takes them off the plugin's usage. */
function rangeGone(conn: BatchConnection, range: readonly [string, string, string, string], n: number, bytes: number): number {
  conn.run(USAGE_OFF_COUNTED_SQL, [range[0], n, bytes]);
  return conn.run(RANGE_DELETE_SQL, [...range]);
}

// Whether the scope's keys in [?3, ?4] (at most ?5), past their prefix ?7 (every key of the range
// starts with it), are exactly ?6, the sweep's ids in order with NUL between (no key holds NUL), and
// their number and bytes. The ids, not prefix + id: a text with the prefix once per id cost a
// plugin sweeping one list under 50 long prefixes seconds of the thread per call (a review).
const EXACT_RANGE_SQL = `select count(*), coalesce(sum(b), 0), coalesce(group_concat(substr(key, length(?7) + 1), char(0)), '') = ?6
  from (select key, ${ROW_BYTES("plugin_kv")} as b ${rangeOf(5)})`;
/**
 * At most this many ids are checked so: the text SQL builds is then at most 5 MB (keys of at most
 * KV_LIMITS.keyBytes), whatever the plugin stored. Longer lists take the key read.
 */
const EXACT_IDS = 10_000;

/**
 * An exact sweep whose range holds exactly its keys, one per id (a bulk delete of indexed
 * sessions), deleted by one range: told by comparing the range's keys (past the prefix) with
 * the ids in SQL, where reading them as JSON into JS and walking them cost about three times as
 * much (10,000 keys: 2 ms against 6). Undefined when it is not so (the key read then tells more).
 */
function exactlyTheirs(conn: BatchConnection, range: readonly [string, string, string, string], prefix: string, list: ListInOrder): number | undefined {
  const ids = list.exact;
  if (ids.length > EXACT_IDS) return undefined;
  const [n, bytes, same] = conn.all(EXACT_RANGE_SQL, [...range, ids.length + 1, (list.joined ??= ids.join("\u0000")), prefix])[0] as [number, number, number];
  if (Number(n) === 0) return 0;
  // As many keys as ids, and the same text: then the same keys (with as many NULs as separators, no
  // id held one).
  if (Number(n) !== ids.length || Number(same) !== 1) return undefined;
  return rangeGone(conn, range, Number(n), Number(bytes));
}

/**
 * An id list in order, and what sweeps derive from it, kept per list: one bulk delete's list is the
 * same array for every plugin that sweeps it (session-ids.ts keeps the last one parsed), so 7
 * plugins sort it once.
 */
interface ListInOrder {
  /** Sorted (JS order), without repeats. */
  exact: readonly string[];
  /** The same without "" (by id prefix, the id must end before the key's last ':'). */
  byIdPrefix: readonly string[];
  /** `exact` joined by NUL: the text an exact sweep's range is compared with. */
  joined?: string;
  /** idPrefixBounds of `byIdPrefix`. */
  bounds?: [string, string];
}
const inOrder = new WeakMap<readonly string[], ListInOrder>();

function listInOrder(sweep: KvSweep): ListInOrder {
  let o = inOrder.get(sweep.ids);
  if (!o) {
    const exact = sortedDistinct(sweep.ids);
    inOrder.set(sweep.ids, (o = { exact, byIdPrefix: exact[0] === "" ? exact.slice(1) : exact }));
  }
  return o;
}

/**
 * [first, last] of `id + ":"` and `id + ";"` over the ids: not those of the first and last id, as
 * "a!:" sorts before "a:" though "a" sorts before "a!" (ids below U+D800: JS order is SQLite's).
 */
function idPrefixBounds(ids: readonly string[]): [string, string] {
  let lo = ids[0]! + ":";
  let hi = ids[0]! + ";";
  for (const id of ids) {
    const first = id + ":";
    const last = id + ";";
    if (first < lo) lo = first;
    if (last > hi) hi = last;
  }
  return [lo, hi];
}

/** Sorted (JS order), without repeats; a list already so (a delete's ids are) is taken as it is. */
function sortedDistinct(ids: readonly string[]): readonly string[] {
  for (let i = 1; i < ids.length; i++) if (!(ids[i - 1]! < ids[i]!)) return [...new Set(ids)].sort();
  return ids;
}

/** The commit of `sweep`: its matched keys deleted and taken off the plugin's usage. */
export function sweepStep(plugin: string, sweep: KvSweep): ReadingStep {
  const statements = setBased(plugin, sweep);
  return { statements: [...statements], inFile: (conn) => sweepInFile(conn, plugin, sweep, statements) };
}

function sweepInFile(conn: BatchConnection, plugin: string, sweep: KvSweep, [usage, del]: ReturnType<typeof setBased>): number {
  const { session } = sweep;
  const ordered = !OUT_OF_ORDER.test(sweep.idsJson) && !OUT_OF_ORDER.test(sweep.prefix);
  const most = Math.min(KEYS_READ_PER_ID * sweep.ids.length + 1024, KEYS_READ_MAX);
  if (ordered) {
    const gone = wholeRange(conn, plugin, sweep, most);
    if (gone !== undefined) return gone;
  }
  const bounds = boundsOf(sweep);
  if (!bounds) return 0;
  const text = conn.all(RANGE_ROWS_SQL, [plugin, session, ...bounds, most + 1, KEYS_READ_BYTES])[0]?.[0];
  const rows = text == null ? undefined : (JSON.parse(String(text)) as Array<[string, number]>);
  if (rows === undefined || rows.length > most) {
    conn.run(usage.sql, usage.args);
    return conn.run(del.sql, del.args);
  }
  // Runs of matched keys in key order: [first, last] each, no kept key between.
  const runs: Array<[string, string]> = [];
  const matched: string[] = [];
  let bytes = 0;
  let inRun = false;
  for (const [key, size] of rows) {
    if (!sweep.matches(session, key)) {
      inRun = false;
      continue;
    }
    matched.push(key);
    bytes += size;
    if (inRun) runs[runs.length - 1]![1] = key;
    else runs.push([key, key]);
    inRun = true;
  }
  if (matched.length === 0) return 0;
  conn.run(USAGE_OFF_COUNTED_SQL, [plugin, matched.length, bytes]);
  // A run is one statement: worth it while runs are few against the keys they hold.
  if (runs.length * 4 > matched.length) return conn.run(KEYS_DELETE_SQL, [plugin, session, JSON.stringify(matched)]);
  let deleted = 0;
  for (const [first, last] of runs) deleted += conn.run(RANGE_DELETE_SQL, [plugin, session, first, last]);
  return deleted;
}
