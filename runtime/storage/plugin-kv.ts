// Every plugin's KV on one database (host-api/kv.ts's KvBackend), owned by the runtime: synchronous
// reads through a SyncReader, and a group commit for writes. Change sets queued while a commit runs
// go into the next one together, as ONE batch of set-based statements (one round trip to a libSQL
// server, no interactive transaction), so a fan-out whose ten plugins each write costs one commit.
// A change set with guards (kv_incr, kv_cas) goes in that batch too; when one of its guards no longer
// holds, it alone fails as a whole (the others are committed again without it). Writes for a deleted
// (tombstoned) session are dropped.
import { CompiledQuery, type Transaction } from "kysely";
import { setImmediate } from "node:timers";
import { GUARD_VALUE_IN_SET_CHARS, KV_LIMITS, KvConflictError, KvQuotaError, KvSweep, type KvBackend, type KvChangeSet, type KvUsage } from "../../host-api/kv.ts";
import type { Storage } from "./db.ts";
import type { Database } from "./schema.ts";
import { failUnless, failUnlessWithinQuota, isGuardFailure, isQuotaFailure } from "./guard.ts";
import { PluginCallError } from "../../hooks/failures.ts";
import type { SqlArg, SyncReader } from "./sync-reader.ts";
import { sqlJson, sqlJsonChunks } from "./sql-json.ts";
import type { BatchItem } from "./file-batch.ts";
import { DISTINCT_SWEEP_ROWS, KEYS_DELETE_SQL, keyOfIdPrefix, sweepArgs, sweepRows, sweepStep } from "./kv-sweep.ts";
import { countedDelete, usageOffSql } from "./kv-usage.ts";

const USAGE_TTL_MS = 1000;

// A session's last ?2 messages (?1 the session): the seq of the ?2-th newest bounds the range (all
// of them when there are fewer).
const RECENT = `from messages where session_id = ?1
  and seq >= coalesce((select seq from messages where session_id = ?1 order by seq desc limit 1 offset ?2 - 1), 0)`;
// The bytes of their JSON answer ([{"role":..,"content":..},..], each text quoted and escaped, at
// least as long as JSON.stringify makes it), or null when their contents alone pass ?3: told by the
// rows' headers first (octet_length reads no content). A byte is at most six in JSON (\u0001), so
// while six times the raw bytes fit, that bound is the answer (a turn's read of 20 messages costs
// no content pass); only near ?3 are the escaped texts summed, at most ?3 bytes of them read. Raw
// bytes alone let 4 MB of control characters make a 24 MB answer (an outside probe).
const RECENT_JSON_BYTES_SQL = `select case when r.raw > ?3 then null when r.bound <= ?3 then r.bound
  else (select coalesce(sum(length(cast(json_quote(content) as blob)) + length(cast(json_quote(role) as blob)) + 21), 0) + 2 ${RECENT}) end
  from (select coalesce(sum(octet_length(content)), 0) as raw, coalesce(sum(6 * (octet_length(content) + octet_length(role)) + 25), 0) + 2 as bound ${RECENT}) r`;

// Deleted keys: one KEYS_DELETE_SQL per (plugin, scope) after this (a key list probes the primary
// key directly; a row-value IN over all three columns was twice as slow at 70,000 keys). The keys
// are distinct (a map's).
// Distinct keys: two JS keys that differ only in a lone surrogate are one key once sqlJson has
// made it U+FFFD, and would be taken off the usage twice.
const DELETE_USAGE_SQL = usageOffSql(`from (select distinct value from json_each(?3)) j cross join plugin_kv k where k.plugin = ?1 and k.session_id = ?2 and k.key = j.value`);
// A write for a session that was deleted meanwhile (tombstoned: its KV is purged) is dropped.
const UPSERT_SQL = `insert into plugin_kv (plugin, session_id, key, value, updated_at)
  select json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'), ?2
  from json_each(?1)
  where json_extract(value, '$[1]') = '' or not exists (select 1 from session_tombstones t where t.id = json_extract(value, '$[1]'))
  on conflict (plugin, session_id, key) do update set value = excluded.value, updated_at = excluded.updated_at`;
// The first key at or after the prefix tells whether the scope has any key with it: if not, the
// ids are not even parsed (plugins that clean up after every bulk delete mostly find nothing).
const PREFIX_PROBE = `coalesce((select substr(key, 1, length(?3)) = ?3 from plugin_kv
    where plugin = ?1 and session_id = ?2 and key >= ?3 order by key limit 1), 0)`;
const HAS_PREFIX_SQL = `select ${PREFIX_PROBE}`;
// The keys of ?3 (a JSON array) stored in plugin ?1's scope ?2, as one JSON text.
const STORED_AMONG_SQL = `select json_group_array(key) from plugin_kv where plugin = ?1 and session_id = ?2 and key in (select value from json_each(?3))`;
// The [scope, key] pairs of ?2 (a JSON array) plugin ?1 stores, with their values' bytes, as one JSON
// text: one primary key seek per pair (CROSS JOIN keeps the list outside).
const STORED_SIZES_SQL = `select json_group_array(json_array(k.session_id, k.key, octet_length(k.value))) from json_each(?2) j cross join plugin_kv k
  where k.plugin = ?1 and k.session_id = json_extract(j.value, '$[0]') and k.key = json_extract(j.value, '$[1]')`;
// Whether row r of a byIdPrefix sweep (its key and id) is one an earlier sweep (its prefix ?n, ids
// ?n+1) deletes: the key's part after ?n (byIdPrefix: up to the key's last ':', which follows r.id)
// is among those ids, looked up in one temporary index built per statement.
const sweptBy = (sweep: KvSweep, n: number) => {
  const lastColon = `length(?3) + length(r.id) + 1`;
  return sweep.byIdPrefix
    ? `(substr(r.key, 1, length(?${n})) = ?${n} and ${lastColon} > length(?${n}) + 1
        and substr(r.key, length(?${n}) + 1, ${lastColon} - length(?${n}) - 1) in (select value from json_each(?${n + 1})))`
    : `(substr(r.key, 1, length(?${n})) = ?${n} and substr(r.key, length(?${n}) + 1) in (select value from json_each(?${n + 1})))`;
};
// How many stored keys `sweep` matches that none of `hiddenBy` (earlier sweeps not yet committed)
// does: one read, counted in SQL, whatever the number of keys (listing them held the thread for
// seconds at 100,000 long keys). An exact sweep's keys are known (prefix + id): those an earlier
// sweep hides are left out of its ids beforehand (KvStore.sweptCount).
const sweepCountSql = (sweep: KvSweep, hiddenBy: readonly KvSweep[]) => {
  const unhidden = sweep.byIdPrefix ? hiddenBy.map((h, i) => ` and not ${sweptBy(h, 5 + 2 * i)}`).join("") : "";
  return `select case when ${PREFIX_PROBE} then (select count(*) from (${sweepRows(sweep, DISTINCT_SWEEP_ROWS)}) r where 1${unhidden}) else 0 end`;
};
// A scope's keys under a prefix (?1 plugin, ?2 scope, ?3 prefix), through the primary key; substr
// keeps LIKE's wildcards out. As ONE JSON string: 10,000 rows as JS values cost more than the read.
// The range's end is the prefix followed by byte F5, which no UTF-8 text holds: without it a prefix
// that matches nothing still read every later key of the scope (100,000 keys: ~57 ms a call).
const keysUnder = (key: string, prefix: string) => `${key} >= ${prefix} and ${key} < ${prefix} || x'F5' and substr(${key}, 1, length(${prefix})) = ${prefix}`;
const KEY_RANGE = `from plugin_kv where plugin = ?1 and session_id = ?2 and ${keysUnder("key", "?3")}`;
export const KEYS_SQL = `select json_group_array(key) from (select key ${KEY_RANGE})`;
// The same, or null when their JSON (each key quoted and escaped, and its comma) would pass ?4 bytes:
// told by one pass over the range before any key is copied out. Escapes counted: a key of control
// characters is six times as long in JSON, past the answer's bound and a libSQL server's ~5 MB text.
const KEYS_WITHIN_SQL = `select case when (select coalesce(sum(length(cast(json_quote(key) as blob)) + 1), 0) + 1 ${KEY_RANGE}) > ?4 then null
  else (select json_group_array(key) from (select key ${KEY_RANGE})) end`;
// Session-scoped KV of deleted sessions (?: their ids as JSON), through the partial index: each id
// is one seek there (json_each walked once, CROSS JOIN), and only the keys found go into the list
// the delete works from; `session_id IN (select json_each)` first copied every id into a temporary
// index (100,000 ids: ~20% of the purge).
// The ids are distinct (a deletion's result).
export const [PURGE_USAGE_SQL, PURGE_SQL] = countedDelete(`from json_each(?1) j cross join plugin_kv k on k.session_id = j.value where k.session_id <> ''`);
export const ANY_SESSION_KV_SQL = `select 1 from plugin_kv where session_id <> '' limit 1`;
/** A database that cannot answer is the host's fault: the call fails as `unavailable`. */
const unavailable = (err: unknown) => new PluginCallError("unavailable", `database: ${(err as Error).message}`.slice(0, 500));
const GUARD_PRESENT_SQL = failUnless(`exists (select 1 from plugin_kv where plugin = ?1 and session_id = ?2 and key = ?3 and value = ?4)`);
const GUARD_ABSENT_SQL = failUnless(`not exists (select 1 from plugin_kv where plugin = ?1 and session_id = ?2 and key = ?3)`);
// Every guard of a change set at once (?2: [[session, key, expected or null], ...] as JSON): one
// statement, where one per guard made a call's 27,000 kv_incr a commit that held the thread ~290 ms.
const GUARDS_SQL = failUnless(`not exists (select 1 from json_each(?2) g where case when json_type(g.value, '$[2]') = 'null'
    then exists (select 1 from plugin_kv k where k.plugin = ?1 and k.session_id = g.value ->> 0 and k.key = g.value ->> 1)
    else not exists (select 1 from plugin_kv k where k.plugin = ?1 and k.session_id = g.value ->> 0 and k.key = g.value ->> 1 and k.value = g.value ->> 2) end)`);
/** Up to this many guards are checked one statement each (a turn's kv_incr or kv_cas: no JSON to build or parse). */
const GUARDS_ONE_BY_ONE = 4;
const USAGE_SQL = `select plugin, keys, bytes from plugin_kv_usage where plugin in (select value from json_each(?1))`;
// After the batch's writes: the plugin's stored usage (kept by triggers, every process's writes
// included) within its quota (?2 keys, ?3 bytes), else the whole batch fails (KvQuotaError).
const QUOTA_SQL = failUnlessWithinQuota(`coalesce((select keys <= ?2 and bytes <= ?3 from plugin_kv_usage where plugin = ?1), 1)`);
// A sweep's pattern (?1 plugin, ?2 scope, ?3 prefix, ?4 by id prefix), kept for the sweep to re-apply
// to deleted sessions; at most MAX_SWEEP_PATTERNS a plugin (a plugin choosing a new prefix per call
// would otherwise grow the table, and the sweep's work, without bound).
const MAX_SWEEP_PATTERNS = 32;
const PATTERN_SQL = `insert into kv_sweep_patterns (plugin, session_id, prefix, by_id_prefix)
  select ?1, ?2, ?3, ?4 where (select count(*) from kv_sweep_patterns where plugin = ?1) < ${MAX_SWEEP_PATTERNS}
  on conflict do nothing`;
// The recorded patterns, each applied on its own by the sweep (PATTERN_ROWS) to the sessions deleted
// in a window: what a plugin's own clean-up missed (a write of another process that committed after it).
const PATTERNS_SQL = "select plugin, session_id, prefix, by_id_prefix from kv_sweep_patterns order by plugin, session_id, prefix";
const TOMBSTONES_IN_SQL = "select count(*) from session_tombstones where deleted_at >= ?1 and deleted_at < ?2";
// Keys of a pattern's scope (?3 plugin, ?4 scope) under its prefix (?5): at most ?6 counted.
const UNDER_PREFIX = `k.plugin = ?3 and k.session_id = ?4 and ${keysUnder("k.key", "?5")}`;
const KEYS_UNDER_SQL = `select count(*) from (select 1 from plugin_kv k where ${UNDER_PREFIX} limit ?6)`;
// A key's id under a by-id-prefix pattern: between the prefix and the key's first ':' after it,
// for a key with no ':' past that one. A tombstone's id is a session id, which holds no ':', so
// that is the id the key's last ':' gives (KvSweep); found by two instr() calls, linear in the key
// (rtrim by the key's own characters was quadratic: 0.3 ms a key of 512; a review).
const AFTER_PREFIX = "substr(k.key, length(?5) + 1)";
const FIRST_COLON = `instr(${AFTER_PREFIX}, ':')`;
const ONE_ID_COLON = `${FIRST_COLON} > 1 and instr(substr(${AFTER_PREFIX}, ${FIRST_COLON} + 1), ':') = 0`;
const ID_BEFORE_COLON = `substr(${AFTER_PREFIX}, 1, ${FIRST_COLON} - 1)`;
const IN_WINDOW = "t.deleted_at >= ?1 and t.deleted_at < ?2";
/**
 * The rows one pattern (?3 plugin, ?4 scope, ?5 prefix) gives for the sessions deleted in [?1, ?2),
 * for countedDelete, by the cheaper of two plans: one lookup per tombstone of the window (few
 * deleted sessions), or one per key under the prefix (few keys). Each tombstone looked up once per
 * pattern in one statement, 32 patterns of keys that were never there made a sweep after a bulk
 * delete of 100,000 sessions hold the server's thread 7 s (an outside probe).
 */
const PATTERN_ROWS = {
  exact: {
    byTombstone: `from plugin_kv k where k.plugin = ?3 and k.session_id = ?4 and k.key in (select ?5 || t.id from session_tombstones t where ${IN_WINDOW})`,
    byKey: `from plugin_kv k where ${UNDER_PREFIX} and exists (select 1 from session_tombstones t where t.id = ${AFTER_PREFIX} and ${IN_WINDOW})`,
  },
  byIdPrefix: {
    byTombstone: `from plugin_kv k where k.plugin = ?3 and k.session_id = ?4 and k.key in (select j.key from session_tombstones t cross join plugin_kv j
      where ${IN_WINDOW} and j.plugin = ?3 and j.session_id = ?4 and ${keyOfIdPrefix("j.key", "?5", "t.id")})`,
    byKey: `from plugin_kv k where ${UNDER_PREFIX} and ${ONE_ID_COLON}
      and exists (select 1 from session_tombstones t where t.id = ${ID_BEFORE_COLON} and ${IN_WINDOW})`,
  },
};
// Session-scoped KV of sessions deleted before ?1 (the tombstones say which).
const TOMBSTONED_ROWS = `from plugin_kv k where k.session_id <> '' and k.session_id in (select id from session_tombstones where deleted_at < ?1)`;
// A session deleted without KV has no tombstone; a write that raced its delete is an orphan (?1: not updated since).
const ORPHAN_ROWS = `from plugin_kv k where k.session_id <> '' and k.updated_at < ?1 and not exists (select 1 from sessions s where s.id = k.session_id)
  and not exists (select 1 from session_tombstones t where t.id = k.session_id)`;

/** A change set whose commit may fail on its own account (a guard, a quota): committed alone when its group fails. */
const checked = (q: Queued) => q.changes.guards.length > 0 || q.changes.quota !== undefined;

interface Queued {
  changes: KvChangeSet;
  done: (err?: unknown) => void;
}

export interface KvStoreOptions {
  now: () => number;
  /** A commit that failed for another reason than a guard (logged; the writes are lost). */
  onError: (plugins: string[], err: unknown) => void;
}

export class KvStore implements KvBackend {
  private queue: Queued[] = [];
  private draining: Promise<void> | undefined;
  /**
   * Per plugin, its usage as of our last commit or read (every commit's batch refreshes it; it is
   * re-read after USAGE_TTL_MS so other processes' writes and deletes count too).
   */
  private readonly usageOf = new Map<string, KvUsage & { at: number }>();
  /** Where the last sweep's re-applied patterns stopped (deleted_at): the next one starts there. */
  private sweptUntil: number | undefined;
  /** Round trips to the database for writes (commits and purges), for the bench and the closing note. */
  writeRoundTrips = 0;

  /** Synchronous reads so far (KV, sessions:read, prompt sections): on a server, one round trip each. */
  get readRoundTrips(): number {
    return this.reader.reads;
  }

  constructor(
    private readonly storage: Storage,
    private readonly reader: SyncReader,
    private readonly opts: KvStoreOptions,
  ) {}

  /**
   * A read for a plugin's host call. A database that cannot answer is the host's fault, not the
   * plugin's: the call fails as `unavailable`, which never counts towards a quarantine.
   */
  private read(sql: string, args: readonly SqlArg[]): unknown[][] {
    try {
      return this.reader.all(sql, args);
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** A point read (the first row), with read()'s failure. */
  private readOne(sql: string, args: readonly SqlArg[]): unknown[] | undefined {
    try {
      return this.reader.one(sql, args);
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** A store reading through `storage`'s synchronous reader. */
  static open(storage: Storage, opts: KvStoreOptions): KvStore {
    return new KvStore(storage, storage.syncReader(), opts);
  }

  /** Waits for queued writes (the reader is the storage's: it closes it). */
  async close(): Promise<void> {
    await this.flush();
  }

  get(plugin: string, session: string, key: string): string | undefined {
    const row = this.readOne("select value from plugin_kv where plugin = ? and session_id = ? and key = ?", [plugin, session, key]);
    return row === undefined ? undefined : String(row[0]);
  }

  /** `key` in several plugins' scopes at once, as "plugin\0scope" -> value (one read). */
  valuesOf(key: string, plugins: readonly string[], sessions: readonly string[]): Map<string, string> {
    const rows = this.read(
      "select plugin, session_id, value from plugin_kv where key = ? and plugin in (select value from json_each(?)) and session_id in (select value from json_each(?))",
      [key, JSON.stringify(plugins), JSON.stringify(sessions)],
    );
    return new Map(rows.map((r) => [`${r[0]}\u0000${r[1]}`, String(r[2])]));
  }

  keys(plugin: string, session: string, prefix: string, maxBytes = Infinity): string[] | undefined {
    const row = maxBytes === Infinity ? this.readOne(KEYS_SQL, [plugin, session, prefix]) : this.readOne(KEYS_WITHIN_SQL, [plugin, session, prefix, maxBytes]);
    if (row?.[0] == null) return maxBytes === Infinity ? [] : undefined;
    return (JSON.parse(String(row[0])) as string[]).sort();
  }

  storedAmong(plugin: string, session: string, keys: readonly string[]): Set<string> {
    const row = this.readOne(STORED_AMONG_SQL, [plugin, session, sqlJson(keys)]);
    return new Set(JSON.parse(String(row?.[0] ?? "[]")) as string[]);
  }

  storedSizes(plugin: string, slots: ReadonlyArray<readonly [string, string]>): Array<[string, string, number]> {
    const row = this.readOne(STORED_SIZES_SQL, [plugin, sqlJson(slots)]);
    return JSON.parse(String(row?.[0] ?? "[]")) as Array<[string, string, number]>;
  }

  hasPrefix(plugin: string, session: string, prefix: string): boolean {
    return Number(this.readOne(HAS_PREFIX_SQL, [plugin, session, prefix])?.[0] ?? 0) === 1;
  }

  sweptCount(plugin: string, sweep: KvSweep, hiddenBy: readonly KvSweep[] = []): number {
    if (!sweep.byIdPrefix && hiddenBy.length > 0) {
      const { session, prefix } = sweep;
      const ids = sweep.ids.filter((id) => !hiddenBy.some((h) => h.matches(session, prefix + id)));
      if (ids.length === 0) return 0;
      sweep = new KvSweep(session, prefix, JSON.stringify(ids), ids, false);
    }
    const args = [...sweepArgs(plugin, sweep), ...(sweep.byIdPrefix ? hiddenBy.flatMap((h) => [h.prefix, h.idsJson]) : [])];
    return Number(this.readOne(sweepCountSql(sweep, hiddenBy), args)?.[0] ?? 0);
  }

  /**
   * sessions:read for plugins: the session's last `limit` messages, oldest first, read synchronously
   * on the same connection as KV (a WASM call cannot await); undefined when their JSON would hold
   * more than `maxBytes` (UTF-8), told before any content is copied out (RECENT_JSON_BYTES_SQL).
   */
  recentMessages(sessionId: string, limit: number, maxBytes = Infinity): Array<{ role: string; content: string }> | undefined {
    if (maxBytes !== Infinity) {
      const bytes = this.readOne(RECENT_JSON_BYTES_SQL, [sessionId, limit, maxBytes])?.[0];
      if (bytes === null || Number(bytes ?? 0) > maxBytes) return undefined;
    }
    const rows = this.read("select role, content from messages where session_id = ? order by seq desc limit ?", [sessionId, limit]);
    return rows.reverse().map((r) => ({ role: String(r[0]), content: String(r[1]) }));
  }

  usage(plugin: string): KvUsage {
    let u = this.usageOf.get(plugin);
    const now = this.opts.now();
    if (!u || now - u.at > USAGE_TTL_MS) {
      const rows = this.read("select keys, bytes from plugin_kv_usage where plugin = ?", [plugin]);
      u = rows.length === 0 ? { keys: 0, bytes: 0, at: now } : { keys: Number(rows[0]![0]), bytes: Number(rows[0]![1]), at: now };
      this.usageOf.set(plugin, u);
    }
    return u;
  }

  commit(changes: KvChangeSet): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ changes, done: (err) => (err === undefined ? resolve() : reject(err)) });
      this.draining ??= this.drain();
    });
  }

  /** Resolves once every change set queued so far is committed (or failed). */
  async flush(): Promise<void> {
    while (this.draining) await this.draining;
  }

  /**
   * Removes the session-scoped KV of deleted sessions (after on_session_delete, whose plugins could
   * still read it): set-based, one round trip whatever the number of keys. Their tombstones stay
   * until the sweep, so a late write for them (a call that began before the delete) is dropped.
   */
  async purgeSessions(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.flush();
    // No plugin keeps session-scoped KV at all (one seek): no write transaction, no wait for the disk
    // (a tenth of a 1,000-session seeded delete). A write for a deleted session committed after this
    // read is refused by its tombstone.
    if (this.readOne(ANY_SESSION_KV_SQL, []) === undefined) return this.forgetUsage();
    this.writeRoundTrips++;
    // In parts a libSQL server takes (150,000 ids are more than its ~5 MB a text).
    await this.storage.batch(
      sqlJsonChunks(ids).flatMap((json) => [
        { sql: PURGE_USAGE_SQL, args: [json] },
        { sql: PURGE_SQL, args: [json] },
      ]),
    );
    this.forgetUsage();
  }

  /**
   * The same purge inside the caller's write transaction (a delete nobody reads the KV after: no
   * plugin subscribes to on_session_delete); call forgetUsage() once it has committed.
   */
  async purgeSessionsIn(trx: Transaction<Database>, idsJson: string): Promise<void> {
    // No plugin keeps session-scoped KV at all (one seek in the partial index): nothing to look up
    // per id (100,000 ids: about 70 ms of probes that find nothing).
    const any = await trx.executeQuery(CompiledQuery.raw(ANY_SESSION_KV_SQL, []));
    if (any.rows.length === 0) return;
    // No usage changed: the sessions had no KV (mostly so), and the delete would only seek again.
    const counted = await trx.executeQuery(CompiledQuery.raw(PURGE_USAGE_SQL, [idsJson]));
    if (Number(counted.numAffectedRows ?? 1) > 0) await trx.executeQuery(CompiledQuery.raw(PURGE_SQL, [idsJson]));
  }

  /** Drops the cached usage: the next quota check reads it again (after a purge committed). */
  forgetUsage(): void {
    this.usageOf.clear();
  }

  /**
   * Clean-up a process that died between a delete and its purge left behind: KV of sessions deleted
   * more than `graceMs` ago; tombstones are dropped after `tombstoneMs`. Returns the rows removed.
   */
  async sweep(graceMs: number, tombstoneMs = 3_600_000): Promise<number> {
    const now = this.opts.now();
    // Sessions deleted since the last sweep's cutoff (all kept tombstones, at the first): each is
    // looked up once per recorded pattern, so a bulk delete is not walked again every hour.
    const from = this.sweptUntil ?? 0;
    const until = now - graceMs;
    // The patterns first, each in a transaction of its own (the thread is handed back between them),
    // before the tombstones they need can expire below.
    let removed = await this.sweepPatterns(from, until);
    const deletes: Array<[rows: string, args: number[]]> = [
      [TOMBSTONED_ROWS, [now - graceMs]],
      [ORPHAN_ROWS, [now - graceMs]],
    ];
    const results = await this.storage.batch([
      ...deletes.flatMap(([rows, args]) => countedDelete(rows).map((sql) => ({ sql, args }))),
      { sql: "delete from session_tombstones where deleted_at < ?", args: [now - Math.max(tombstoneMs, graceMs)] },
    ]);
    this.sweptUntil = Math.max(from, until);
    this.usageOf.clear();
    // Each delete follows its usage statement: results 1, 3.
    for (let i = 0; i < deletes.length; i++) removed += results[2 * i + 1]?.rowsAffected ?? 0;
    return removed;
  }

  /**
   * Each recorded pattern applied to the sessions deleted in [from, until), by the cheaper plan
   * (PATTERN_ROWS), in a transaction of its own (the thread is handed back between them): per key
   * when the pattern has no more keys than the window has tombstones, else per tombstone (a seek
   * each, and by id prefix the keys within that id's range). A pattern with no key left (a plugin
   * that stopped using it, or was removed) costs one seek. Returns the rows removed.
   */
  private async sweepPatterns(from: number, until: number): Promise<number> {
    if (!(until > from)) return 0;
    const tombstones = Number((await this.storage.client.execute({ sql: TOMBSTONES_IN_SQL, args: [from, until] })).rows[0]?.[0] ?? 0);
    if (tombstones === 0) return 0;
    const patterns = (await this.storage.client.execute(PATTERNS_SQL)).rows;
    let removed = 0;
    for (const row of patterns) {
      const args = [from, until, String(row[0]), String(row[1]), String(row[2])];
      const keys = Number((await this.storage.client.execute({ sql: KEYS_UNDER_SQL, args: [...args, tombstones + 1] })).rows[0]?.[0] ?? 0);
      if (keys === 0) continue;
      const plans = Number(row[3]) === 1 ? PATTERN_ROWS.byIdPrefix : PATTERN_ROWS.exact;
      const [usage, del] = countedDelete(keys <= tombstones ? plans.byKey : plans.byTombstone);
      const results = await this.storage.batch([
        { sql: usage, args },
        { sql: del, args },
      ]);
      removed += results[1]?.rowsAffected ?? 0;
    }
    return removed;
  }

  private async drain(): Promise<void> {
    // Let the rest of a fan-out queue its writes before the commit starts: its in-thread plugin
    // calls settle within this turn of the event loop, so one commit takes them all.
    await new Promise((resolve) => setImmediate(resolve));
    try {
      while (this.queue.length > 0) await this.commitQueued();
    } finally {
      this.draining = undefined;
    }
  }

  private async commitQueued(): Promise<void> {
    const queued = this.queue;
    this.queue = [];
    for (const group of bySize(queued)) {
      // Guarded sets (kv_incr, kv_cas) go in the group's one batch too: a turn's writes stay one
      // round trip while no guard fails. A guard is checked before the group's writes are applied,
      // so a guarded set after an earlier set of the same plugin (whose write it may have read
      // through the overlay) is committed after the group, on its own.
      const seen = new Set<string>();
      const deferred = new Set<string>(); // its later sets keep their order: after it
      const later: Queued[] = [];
      const now: Queued[] = [];
      for (const q of group) {
        const { plugin } = q.changes;
        if (deferred.has(plugin) || (checked(q) && seen.has(plugin))) {
          deferred.add(plugin);
          later.push(q);
        } else now.push(q);
        seen.add(plugin);
      }
      // One that fails must fail its own change set only: then the others go again, in their
      // order, each guarded one alone and the plain ones between two of them together (a
      // plugin's plain set queued after its guarded one must not be committed before it).
      if ((await this.commitGroup(now)) === "split") {
        let plain: Queued[] = [];
        for (const q of now) {
          if (!checked(q)) {
            plain.push(q);
            continue;
          }
          await this.commitEach(plain);
          plain = [];
          await this.commitGroup([q]);
        }
        await this.commitEach(plain, now.length);
      }
      for (const q of later) await this.commitGroup([q]);
    }
  }

  /**
   * Commits plain change sets together, or, when that fails for one's size, one by one: each is
   * settled. `failedAs`: the size of the group that just failed; plain sets that were all of it go
   * one by one at once (the same batch would fail again).
   */
  private async commitEach(plain: Queued[], failedAs = 0): Promise<void> {
    if (plain.length === 0) return;
    if (plain.length !== failedAs && (await this.commitGroup(plain)) !== "split") return;
    for (const q of plain) await this.commitGroup([q]);
  }

  /**
   * Commits the group's change sets in one batch and settles each of them; never throws. A group of
   * several sets that failed on a guard, or on one set's size (one plugin's set too large for a
   * server must not fail the others'; a review), settles none of them: "split", for commitQueued to
   * tell which one.
   */
  private async commitGroup(group: Queued[]): Promise<"split" | undefined> {
    const plugins = new Set(group.map((q) => q.changes.plugin));
    try {
      const stmts = this.statementsOf(group);
      this.writeRoundTrips++;
      const results = await this.storage.batch(stmts);
      const at = this.opts.now();
      for (const p of plugins) this.usageOf.set(p, { keys: 0, bytes: 0, at });
      for (const row of results[results.length - 1]!.rows) {
        this.usageOf.set(String(row[0]), { keys: Number(row[1]), bytes: Number(row[2]), at });
      }
      for (const q of group) q.done();
    } catch (err) {
      const overQuota = isQuotaFailure(err);
      const conflict = overQuota || isGuardFailure(err);
      // A guard, or one set the database refused for its size: the others may well commit. Any
      // other failure (the database unreachable, an answer lost after a commit) fails them all, as
      // running them again could apply a set twice.
      if (group.length > 1 && (conflict || isTooBig(err))) return "split";
      if (!conflict) this.opts.onError([...plugins], err);
      // The usage this process knew was behind: read it again at the next check.
      if (overQuota) for (const p of plugins) this.usageOf.delete(p);
      for (const q of group) q.done(!conflict ? err : overQuota ? new KvQuotaError(q.changes.plugin) : new KvConflictError(q.changes.plugin));
    }
    return undefined;
  }

  /** The group's statements: its sweeps and guards, then its final state per key set-based. */
  private statementsOf(group: Queued[]): BatchItem[] {
    // The group's final state per key (last write wins), so the delete and upsert statements can
    // run set-based in any order.
    const last = new Map<string, [string, string, string, string | null]>();
    const plugins = new Set<string>();
    const stmts: BatchItem[] = [];
    for (const { changes } of group) {
      plugins.add(changes.plugin);
      // A sweep runs before every key write of the group: an earlier change set's write it matches
      // becomes a delete here, a later one's stays a write (and wins). Each guard is checked where
      // the call read its key: after the sweeps the call had staged by then, before the others.
      const sweeps = changes.sweeps ?? [];
      const guardsAfter = byAfterSweeps(changes.guards);
      for (let i = 0; i <= sweeps.length; i++) {
        stmts.push(...guardStatements(changes.plugin, guardsAfter.get(i)));
        const sweep = sweeps[i];
        if (!sweep) continue;
        stmts.push(sweepStep(changes.plugin, sweep));
        stmts.push({ sql: PATTERN_SQL, args: [changes.plugin, sweep.session, sweep.prefix, sweep.byIdPrefix ? 1 : 0] });
        for (const w of last.values()) if (w[0] === changes.plugin && w[3] !== null && sweep.matches(w[1], w[2])) w[3] = null;
      }
      for (const [session, key, value] of changes.writes) {
        const id = JSON.stringify([changes.plugin, session, key]);
        last.delete(id);
        last.set(id, [changes.plugin, session, key, value]);
      }
    }
    const deletes = new Map<string, { plugin: string; session: string; keys: string[] }>();
    const upserts: unknown[] = [];
    for (const [plugin, session, key, value] of last.values()) {
      if (value !== null) {
        upserts.push([plugin, session, key, value]);
        continue;
      }
      const scope = JSON.stringify([plugin, session]);
      let d = deletes.get(scope);
      if (!d) deletes.set(scope, (d = { plugin, session, keys: [] }));
      d.keys.push(key);
    }
    // Each list in texts a libSQL server takes (sqlJsonChunks).
    for (const d of deletes.values()) {
      for (const keys of sqlJsonChunks(d.keys)) {
        const args = [d.plugin, d.session, keys];
        stmts.push({ sql: DELETE_USAGE_SQL, args }, { sql: KEYS_DELETE_SQL, args });
      }
    }
    const now = this.opts.now();
    if (upserts.length > 0) for (const text of sqlJsonChunks(upserts)) stmts.push({ sql: UPSERT_SQL, args: [text, now] });
    for (const { changes } of group) if (changes.quota) stmts.push({ sql: QUOTA_SQL, args: [changes.plugin, changes.quota.keys, changes.quota.bytes] });
    stmts.push({ sql: USAGE_SQL, args: [JSON.stringify([...plugins])] });
    return stmts;
  }
}

/** A text or batch a libSQL server (or SQLite) refused for its size. */
const isTooBig = (err: unknown): boolean => /too big|TOOBIG|too large/i.test(String((err as Error)?.message ?? err));

/** A change set's guards by how many of its sweeps precede them. */
function byAfterSweeps(guards: KvChangeSet["guards"]): Map<number, KvChangeSet["guards"]> {
  const out = new Map<number, KvChangeSet["guards"]>();
  for (const g of guards) (out.get(g[3]) ?? out.set(g[3], []).get(g[3])!).push(g);
  return out;
}

/**
 * The statements checking `guards`: those expecting a short value (kv_incr's numbers, a flag) or
 * none in one set-based statement when there are more than a few; the others one statement each,
 * so no guard's value is copied into a JSON text (a plugin guarding 250 values of 256 KiB of
 * control characters made a 390-million-character text, seconds of the thread).
 */
function guardStatements(plugin: string, guards: KvChangeSet["guards"] = []): BatchItem[] {
  const short = guards.filter((g) => g[2] === null || g[2].length <= GUARD_VALUE_IN_SET_CHARS);
  const inSet = short.length > GUARDS_ONE_BY_ONE ? short : [];
  const alone = inSet.length === 0 ? guards : guards.filter((g) => g[2] !== null && g[2].length > GUARD_VALUE_IN_SET_CHARS);
  // In parts a libSQL server takes (sqlJsonChunks): every part must hold, as the whole list had to.
  const stmts: BatchItem[] = inSet.length > 0 ? sqlJsonChunks(inSet.map((g) => g.slice(0, 3))).map((json) => ({ sql: GUARDS_SQL, args: [plugin, json] })) : [];
  for (const [session, key, expected] of alone) {
    stmts.push(expected === null ? { sql: GUARD_ABSENT_SQL, args: [plugin, session, key] } : { sql: GUARD_PRESENT_SQL, args: [plugin, session, key, expected] });
  }
  return stmts;
}

/** Bytes of keys and values per batch: a call stages at most KV_LIMITS.callBytes, a batch a few calls' worth. */
const BATCH_BYTES = 4 * KV_LIMITS.callBytes;

/** Change sets in groups of at most BATCH_BYTES (a group's writes become one JSON text), in order. */
function bySize(queued: readonly Queued[]): Queued[][] {
  const groups: Queued[][] = [];
  let size = Infinity;
  for (const q of queued) {
    let bytes = 0;
    for (const [session, key, value] of q.changes.writes) bytes += session.length + key.length + (value?.length ?? 0);
    for (const sweep of q.changes.sweeps ?? []) bytes += sweep.idsJson.length;
    for (const [session, key, value] of q.changes.guards) bytes += session.length + key.length + (value?.length ?? 0);
    if (size + bytes > BATCH_BYTES) {
      groups.push([]);
      size = 0;
    }
    groups[groups.length - 1]!.push(q);
    size += bytes;
  }
  return groups;
}
