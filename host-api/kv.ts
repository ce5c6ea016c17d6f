// A plugin's KV namespace as its host functions see it. The database is the one source of truth:
// reads go to it synchronously (KvBackend, implemented by the runtime's KvStore), so a write
// committed by any process on the same database is seen at the next read. A call's writes are
// staged and handed to the backend only when the call succeeds (a failed call leaves nothing
// half-written); until the backend has committed them they stay in an overlay, so the plugin's
// next call reads its own writes. kv_incr and kv_cas record what they read as a guard: the commit
// is refused when another writer changed that key meanwhile, and the call fails as `conflict`
// (the runtime runs it again), so concurrent counters never lose an update.
import { PluginCallError, STORED_QUOTA_TEXT } from "../hooks/failures.ts";

/**
 * Per key, per value, per scope (a session id, "" plugin-wide) and per call: what one call stages is
 * committed as one JSON text, so it is bounded whatever the quota (a text past V8's string limit
 * would fail the commit of every plugin in the group). Every later read of the call checks its
 * staged sweeps, and the commit runs one statement per sweep over its ids on the host's thread, so
 * their number and their ids are bounded too (500 sweeps of the same 50,000 ids: a 6.6 s commit; at the 500,000-id bound, 100-111 ms).
 */
export const KV_LIMITS = { keyBytes: 512, valueBytes: 256 * 1024, scopeBytes: 256, callBytes: 1024 * 1024, callSweeps: 64, callSweepIds: 500_000, callSweepBytes: 16 * 1024 * 1024, callGuards: 32_000 } as const;

/**
 * Distinct keys a call's read cache remembers (PluginKv.reads); past it reads are not remembered (a
 * kv_cas after one reads again). Each is host memory for the call: a plugin reading a million
 * absent keys in one call would hold a million entries.
 */
const REMEMBERED_READS = 32_000;

/** Distinct earlier sweeps (prefix and mode) a counted sweep's count may leave out (sweepsHiding). */
const MAX_HIDING_SWEEPS = 32;
/**
 * A guard expecting a value up to this long is checked within the commit's one JSON list of guards
 * (runtime/storage/plugin-kv.ts); a longer one by a statement of its own.
 */
export const GUARD_VALUE_IN_SET_CHARS = 256;
/**
 * Ids of those earlier sweeps, in all: each counted sweep merges them again and its count checks
 * its keys against every one of them, on the server's thread (64 counted sweeps of 7,812 ids, each
 * hidden by all before it, held the thread 2 s a host call).
 */
const MAX_HIDING_IDS = 50_000;
/**
 * ... and characters of their ids: long ids made each counted sweep merge and hand SQL 16 MB again,
 * 120-170 ms of the thread a host call (an outside probe).
 */
const MAX_HIDING_CHARS = 2 * 1024 * 1024;

/**
 * Within this share of its quota a plugin's commits check the quota in the database too (a call
 * that adds keys then waits for its commit); below it the process's own view is enough.
 */
const QUOTA_MARGIN = 0.1;
/**
 * A commit that, with this process's unchecked commits still under way, adds more than this share
 * of the quota is checked in the database too, wherever the plugin stands: processes committing at
 * once can pass the quota only by what their unchecked commits add, this share each (two adding 80
 * keys of 100 each, both far below it by their own view, stored 160; two running 35 one-key calls
 * each at once against a quota of 40, each call alone under the share, stored 69).
 */
const QUOTA_CHECKED_SHARE = 0.025;

/** A decimal integer as kv_incr stores it: an optional minus, no leading zeros, no exponent. */
const INTEGER = /^(0|-?[1-9][0-9]*)$/;

/** What one staged write costs towards KV_LIMITS.callBytes besides its bytes (its share of the commit's statements and JSON). */
const SLOT_OVERHEAD = 32;

export interface KvQuota {
  keys: number;
  bytes: number;
}

/** Ids of one call's sweeps by id prefix whose keys another id names too (PluginKv.rangeCheck). */
const MAX_NESTED_RANGES = 8;
/**
 * Range starts of one call's sweeps by id prefix whose ids hold ':' or whose prefixes start alike,
 * kept sorted to tell a nesting: each such sweep merges and walks them (bounded host work).
 */
const MAX_OVERLAPPING_STARTS = 10_000;

/** Whether an id holds ':' (decoded: "\\u003a" in the plugin's JSON is one too), cached per list. */
const colonIn = new WeakMap<readonly string[], boolean>();
function holdsColon(ids: readonly string[]): boolean {
  let known = colonIn.get(ids);
  if (known === undefined) colonIn.set(ids, (known = ids.some((id) => id.includes(":"))));
  return known;
}

/** Two sorted lists as one sorted list. */
function mergeSorted(a: readonly string[], b: readonly string[]): string[] {
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) out.push(j >= b.length || (i < a.length && a[i]! <= b[j]!) ? a[i++]! : b[j++]!);
  return out;
}

/** How many of the sorted starts lie within another or repeat one (have one as a prefix): one pass with a stack of enclosing starts. */
function nestedRanges(starts: readonly string[]): number {
  const open: string[] = [];
  let nested = 0;
  for (const s of starts) {
    while (open.length > 0 && !s.startsWith(open[open.length - 1]!)) open.pop();
    if (open.length > 0) nested++;
    open.push(s);
  }
  return nested;
}

/**
 * A set-based delete staged by deleteForSessions: the keys of scope `session` that belong to the
 * sessions `ids`, i.e. `prefix + id` (byIdPrefix false) or `prefix + id + ":" + suffix` where that
 * ":" is the key's last (byIdPrefix true). The backend deletes them with one statement at commit;
 * until then the overlay answers reads through `matches`, so no key list crosses the host.
 */
export class KvSweep {
  /** Built at the first match: most sweeps find nothing stored and are dropped unmatched. */
  private wanted: ReadonlySet<string> | undefined;

  constructor(
    readonly session: string,
    readonly prefix: string,
    /** The ids as a JSON array of strings (handed to SQL as is). */
    readonly idsJson: string,
    readonly ids: readonly string[],
    readonly byIdPrefix: boolean,
  ) {}

  matches(session: string, key: string): boolean {
    if (session !== this.session || !key.startsWith(this.prefix)) return false;
    const wanted = (this.wanted ??= new Set(this.ids));
    if (!this.byIdPrefix) return wanted.has(key.slice(this.prefix.length));
    const colon = key.lastIndexOf(":");
    return colon > this.prefix.length && wanted.has(key.slice(this.prefix.length, colon));
  }
}

/**
 * One successful call's changes: its sweeps, then its writes ([session, key, value or null for
 * delete], in order). A write staged before a sweep it matches is already a delete, so applying
 * every sweep before the writes keeps the call's order.
 */
export interface KvChangeSet {
  plugin: string;
  sweeps?: KvSweep[];
  writes: Array<[string, string, string | null]>;
  /**
   * [session, key, value the call read (null: absent), how many of `sweeps` the call had staged
   * when it read it]: the commit holds only if each still is, checked after those sweeps and before
   * the rest (a key read, then swept by the same call, was there when read).
   */
  guards: Array<[string, string, string | null, number]>;
  /**
   * Set when the call adds keys or bytes near the plugin's quota: the commit holds only if the
   * plugin's stored usage, its writes applied, is still within it (other processes write too).
   */
  quota?: KvQuota;
}

/** The plugin's keys and bytes (key + value, UTF-8) as of the backend's last commit or read. */
export interface KvUsage {
  keys: number;
  bytes: number;
}

/** Where the namespace lives: the shared database (runtime/storage/plugin-kv.ts). */
export interface KvBackend {
  get(plugin: string, session: string, key: string): string | undefined;
  /**
   * Keys of the scope starting with `prefix`, sorted; undefined when, as a JSON array, they would
   * pass `maxBytes` (told before they are read).
   */
  keys(plugin: string, session: string, prefix: string, maxBytes?: number): string[] | undefined;
  /** Which of `keys` the plugin's scope stores (one read). */
  storedAmong(plugin: string, session: string, keys: readonly string[]): Set<string>;
  /** Which of the [scope, key] pairs the plugin stores, as [scope, key, the value's UTF-8 bytes] (one read). */
  storedSizes(plugin: string, slots: ReadonlyArray<readonly [string, string]>): Array<[string, string, number]>;
  /** Whether the plugin's scope holds any key starting with `prefix` (one seek). */
  hasPrefix(plugin: string, session: string, prefix: string): boolean;
  /** How many stored keys `sweep` matches in the plugin's scope that no sweep of `hiddenBy` does (one read). */
  sweptCount(plugin: string, sweep: KvSweep, hiddenBy?: readonly KvSweep[]): number;
  usage(plugin: string): KvUsage;
  /** Commits in order; rejects with KvConflictError when a guard no longer holds. */
  commit(changes: KvChangeSet): Promise<void>;
}

/** A commit refused because the plugin's usage, with its writes, would pass its quota (another process wrote meanwhile). */
export class KvQuotaError extends Error {
  constructor(readonly plugin: string) {
    super(`${STORED_QUOTA_TEXT}${plugin} reached: writes committed meanwhile (by another process) took what was left (plugins.kv_quota)`);
    this.name = "KvQuotaError";
  }
}

export class KvConflictError extends Error {
  constructor(readonly plugin: string) {
    super(`kv: a key this call read with kv_incr/kv_cas was changed by another writer before the call committed`);
    this.name = "KvConflictError";
  }
}

const SEP = "\u0000";
const slot = (session: string, key: string) => session + SEP + key;
/** [session, key] of a slot. */
const unslot = (s: string): [string, string] => {
  const cut = s.indexOf(SEP);
  return [s.slice(0, cut), s.slice(cut + 1)];
};

/**
 * Sweeps of one scope as two maps, `prefix + id` -> the latest generation sweeping it (exact
 * sweeps: the key itself; by id prefix: the key up to its last ':'), so a key is looked up once
 * instead of matched against every sweep (KvSweep.matches).
 */
class SweepIndex {
  private readonly exact = new Map<string, number>();
  private readonly byHead = new Map<string, number>();

  /** The index of `sweeps`, all of one scope. */
  static of(sweeps: Iterable<{ sweep: KvSweep; gen: number }>): SweepIndex {
    const index = new SweepIndex();
    for (const { sweep, gen } of sweeps) {
      const into = sweep.byIdPrefix ? index.byHead : index.exact;
      for (const id of sweep.ids) {
        // By id prefix, an empty id matches nothing (the id must end before the key's last ':').
        if (sweep.byIdPrefix && id === "") continue;
        const k = sweep.prefix + id;
        if ((into.get(k) ?? 0) < gen) into.set(k, gen);
      }
    }
    return index;
  }

  /** The latest generation of a sweep matching `key`, 0 when none does. */
  gen(key: string): number {
    const exact = this.exact.size > 0 ? (this.exact.get(key) ?? 0) : 0;
    if (this.byHead.size === 0) return exact;
    const colon = key.lastIndexOf(":");
    const head = colon > 0 ? (this.byHead.get(key.slice(0, colon)) ?? 0) : 0;
    return Math.max(exact, head);
  }
}

/** A call that wrote nothing (shared: never written to). */
const NO_WRITES: ReadonlyMap<string, string | null> = new Map();

export class PluginKv {
  /** The running call's writes, by slot (insertion order kept: the commit applies them in order). */
  private pending: Map<string, string | null> | undefined;
  /** slot -> [value read (null: absent), the call's sweeps staged before the read]. */
  private guards: Map<string, [string | null, number]> | undefined;
  /** Writes handed to the backend but not yet committed: slot -> value and the change set's number. */
  private readonly unflushed = new Map<string, { value: string | null; gen: number }>();
  /** The running call's sweeps, and those handed to the backend but not yet committed. */
  private pendingSweeps: KvSweep[] | undefined;
  /**
   * The call's sweeps by id prefix that may overlap (rangeCheck): the ids per scope and prefix (ids
   * without ':'), the range starts per scope, sorted (the others), the sweeps indexed, the repeats.
   */
  private callRanges: { ids: Map<string, Set<string>>; starts: Map<string, string[]>; indexed: Set<KvSweep>; repeats: number } | undefined;
  private readonly unflushedSweeps = new Set<{ sweep: KvSweep; gen: number }>();
  private gen = 0;
  /** The bytes the call stages (every write, deletes' keys included: what its commit carries; KV_LIMITS.callBytes). */
  private callBytes = 0;
  /**
   * What the call's writes add to the plugin's usage as far as it knows (keys, bytes of key and
   * value), and each written slot's share of it. A slot no write of this process holds counts as a
   * new key, with no read; the stored value is read only where that decides the quota (a write or a
   * delete near it), so a replacement or a delete is credited there.
   */
  private callNet = { keys: 0, bytes: 0 };
  private slotNet: Map<string, [keys: number, bytes: number]> | undefined;
  /** Slots whose stored value creditStored() read this call (each is read once). */
  private creditChecked: Set<string> | undefined;
  /** Ids the call's sweeps named (KV_LIMITS.callSweepIds). */
  private callSweepIds = 0;
  /** Bytes of the keys (and short expected values) the call guards: its commit's guard list (KV_LIMITS.callBytes). */
  private callGuardBytes = 0;
  /** kv_delete_sessions host calls the call made (KV_LIMITS.callSweeps). */
  private callSweepCalls = 0;
  /** Characters of the ids' JSON the call's sweeps handed over (KV_LIMITS.callSweepBytes). */
  private callSweepBytes = 0;
  /** Keys and bytes of this plugin's earlier calls whose writes are not committed yet (slots of `unflushed` holding a value). */
  private readonly inFlight = { keys: 0, bytes: 0 };
  /** What this process's commits not checked against the quota add, while they are under way. */
  private readonly uncheckedAdds = { keys: 0, bytes: 0 };
  /**
   * What the running call last read from the database, by slot (null: absent): a kv_cas or kv_incr
   * after a read of the same key guards that value (what the call decided on) without a second
   * read, a round trip on a server. Plain reads always go to the database. Made by the call's first
   * read and dropped at its end: a fresh Map costs ~20 ns, clear() on a long-lived one 40-500 ns.
   */
  private reads: Map<string, string | null> | undefined;

  constructor(
    readonly plugin: string,
    private readonly backend: KvBackend,
    private readonly quota: KvQuota,
  ) {}

  /** A call begins: what an earlier stretch (an instance's start function) read is not reused. */
  begin(): void {
    this.forgetReads();
  }

  private forgetReads(): void {
    this.reads = undefined;
  }

  get(session: string, key: string): string | undefined {
    checkSlot(session, key);
    const staged = this.staged(session, key);
    if (staged !== undefined) return staged ?? undefined;
    return this.readStored(session, key);
  }

  /** The stored value, read from the database and remembered as what this call read. */
  private readStored(session: string, key: string): string | undefined {
    const value = this.backend.get(this.plugin, session, key);
    const reads = (this.reads ??= new Map());
    if (reads.size < REMEMBERED_READS) reads.set(slot(session, key), value ?? null);
    return value;
  }

  /**
   * This process's write of `key` that the database may not have yet (the running call's, or one
   * still being committed): the value, null for a delete, undefined when there is none. `swept`
   * (list(): many keys of one scope) answers which sweeps match the key from an index of their ids
   * instead of matching each sweep.
   */
  staged(session: string, key: string, swept?: { pending: SweepIndex; unflushed: SweepIndex }): string | null | undefined {
    const s = slot(session, key);
    if (this.pending?.has(s)) return this.pending.get(s);
    // A pending write the call made before its sweep was turned into a delete when it swept.
    if (swept ? swept.pending.gen(key) > 0 : this.pendingSweeps?.some((w) => w.matches(session, key))) return null;
    const u = this.unflushed.get(s);
    // Within one change set the writes come after its sweeps: the later generation wins.
    const sweptGen = swept ? swept.unflushed.gen(key) : this.unflushedSweepGen(session, key);
    if (sweptGen > 0 && (u === undefined || u.gen < sweptGen)) return null;
    return u?.value;
  }

  /** The latest generation of the sweeps being committed that match `key`, 0 when none does. */
  private unflushedSweepGen(session: string, key: string): number {
    let gen = 0;
    for (const w of this.unflushedSweeps) if (w.gen > gen && w.sweep.matches(session, key)) gen = w.gen;
    return gen;
  }

  set(session: string, key: string, value: string): void {
    checkSlot(session, key);
    // The database's native driver reads a text up to its first NUL: the rest would be lost silently.
    if (value.includes("\u0000")) throw new PluginCallError("trap", `kv value for "${key.slice(0, 40)}" contains NUL (U+0000), which is not stored`);
    const bytes = utf8Length(value);
    if (bytes > KV_LIMITS.valueBytes) throw new PluginCallError("trap", `kv value for "${key.slice(0, 40)}" exceeds ${KV_LIMITS.valueBytes} bytes`);
    const keyBytes = utf8Length(key);
    const size = bytes + keyBytes;
    this.chargeCall(session, size);
    const s = slot(session, key);
    const usage = this.backend.usage(this.plugin);
    let next = this.shareOf(usage, session, key, s, size, keyBytes);
    // The call's earlier writes taken as new without a read may have replaced stored keys: asked
    // now, so whether a write passes does not depend on the order of the call's writes.
    if (this.passes(usage, s, next) && this.creditStored()) next = this.shareOf(usage, session, key, s, size, keyBytes);
    if (this.passes(usage, s, next)) {
      throw new PluginCallError(
        "quota",
        `${STORED_QUOTA_TEXT}${this.plugin} reached (${usage.keys} keys, ${usage.bytes} bytes stored, ${this.inFlight.keys + Math.max(0, this.callNet.keys)} keys being written; limits ${this.quota.keys} keys, ${this.quota.bytes} bytes: plugins.kv_quota)`,
      );
    }
    this.account(s, next);
    this.stage(session, key, value);
  }

  /** What writing `size` bytes (key and value) at slot `s` adds to the usage, as this call knows it. */
  private shareOf(usage: KvUsage, session: string, key: string, s: string, size: number, keyBytes: number): [number, number] {
    const before = this.slotNet?.get(s);
    const prev = this.pending?.get(s);
    // After this call's earlier write of the slot: a value (replaced now) or none (deleted).
    if (before) return typeof prev === "string" ? [before[0], before[1] + size - keyBytes - utf8Length(prev)] : [before[0] + 1, before[1] + size];
    // Replaces a value still being committed, already counted in inFlight.
    if (this.heldInFlight(s) && !this.pendingSweeps?.some((w) => w.matches(session, key))) return [0, size];
    // New unless stored: read only when that decides. A plugin at its quota can still update or
    // shrink what it has.
    if (!this.passes(usage, s, [1, size])) return [1, size];
    const stored = this.get(session, key);
    return stored === undefined ? [1, size] : [0, size - keyBytes - utf8Length(stored)];
  }

  /**
   * The call's values counted as one new key each without a read (a write far from the quota; a
   * delete then a write) that replace a stored key are credited: one read for all of them, each
   * slot read once a call. True when a share changed.
   */
  private creditStored(): boolean {
    const checked = (this.creditChecked ??= new Set());
    const slots: string[] = [];
    for (const [s, share] of this.slotNet ?? []) {
      if (share[0] !== 1 || checked.has(s) || typeof this.pending?.get(s) !== "string" || this.heldInFlight(s)) continue;
      const [session, key] = unslot(s);
      // One a sweep of this call (or one being committed) deletes first is new whatever is stored.
      if (this.pendingSweeps?.some((w) => w.matches(session, key)) || this.unflushedSweepGen(session, key) > 0) continue;
      slots.push(s);
      checked.add(s);
    }
    if (slots.length === 0) return false;
    const stored = new Map(this.backend.storedSizes(this.plugin, slots.map(unslot)).map(([session, key, bytes]) => [slot(session, key), bytes]));
    let changed = false;
    for (const s of slots) {
      const valueBytes = stored.get(s);
      if (valueBytes === undefined) continue;
      this.account(s, [0, utf8Length(this.pending!.get(s)!) - valueBytes]);
      changed = true;
    }
    return changed;
  }

  /** Whether slot `s` taking share `next` of the call's additions grows the usage past the quota, as this process knows it. */
  private passes(usage: KvUsage, s: string, next: readonly [number, number]): boolean {
    const before = this.slotNet?.get(s) ?? [0, 0];
    const keys = next[0] - before[0];
    const bytes = next[1] - before[1];
    return (
      (keys > 0 && usage.keys + this.inFlight.keys + this.callNet.keys + keys > this.quota.keys) ||
      (bytes > 0 && usage.bytes + this.inFlight.bytes + this.callNet.bytes + bytes > this.quota.bytes)
    );
  }

  /** Slot `s`'s share of the call's additions becomes `next`. */
  private account(s: string, next: [number, number]): void {
    const slots = (this.slotNet ??= new Map());
    const before = slots.get(s) ?? [0, 0];
    this.callNet.keys += next[0] - before[0];
    this.callNet.bytes += next[1] - before[1];
    slots.set(s, next);
  }

  /**
   * Slot `s` is deleted by this call: what its earlier write added goes; a stored value's place is
   * credited only near the quota (where it decides a later write; found by one read).
   */
  private accountDelete(session: string, key: string, s: string): void {
    const before = this.slotNet?.get(s);
    const prev = this.pending?.get(s);
    if (before) {
      if (typeof prev === "string") this.account(s, [before[0] - 1, before[1] - utf8Length(key) - utf8Length(prev)]);
      return;
    }
    if (this.heldInFlight(s) || !this.nearQuota()) return this.account(s, [0, 0]);
    const stored = this.get(session, key);
    this.account(s, stored === undefined ? [0, 0] : [-1, -utf8Length(key) - utf8Length(stored)]);
  }

  delete(session: string, key: string): void {
    checkSlot(session, key);
    this.chargeCall(session, utf8Length(key));
    this.accountDelete(session, key, slot(session, key));
    this.stage(session, key, null);
  }

  /** Whether a write of this process still being committed holds a value at slot `s` (counted in inFlight.keys). */
  private heldInFlight(s: string): boolean {
    return (this.unflushed.get(s)?.value ?? null) !== null;
  }

  /** Counts `size` bytes (and a slot's overhead) towards the call's KV_LIMITS.callBytes. */
  private chargeCall(session: string, size: number): void {
    const next = this.callBytes + size + session.length + SLOT_OVERHEAD;
    if (next > KV_LIMITS.callBytes) throw new PluginCallError("quota", `kv: one call may stage at most ${KV_LIMITS.callBytes} bytes of writes`);
    this.callBytes = next;
  }

  /** Adds `delta` to the integer at `key` (absent: 0) and returns the new value; guarded. */
  incr(session: string, key: string, delta: number): number {
    const current = this.guardedRead(session, key);
    // Decimal integers only: Number() also took "1e3", "0x10", "" and "-0" as integers.
    const n = current === undefined ? 0 : INTEGER.test(current) ? Number(current) : NaN;
    if (!Number.isSafeInteger(n)) throw new PluginCallError("trap", `kv_incr: the value of "${key.slice(0, 40)}" is not an integer within ±${Number.MAX_SAFE_INTEGER}`);
    const next = n + delta;
    // Past the safe range the sum would be rounded (and the i64 answer wrapped), then stored wrong;
    // a delta past it arrives rounded (Number of an i64) and is refused here too.
    if (!Number.isSafeInteger(delta) || !Number.isSafeInteger(next)) {
      throw new PluginCallError("trap", `kv_incr: ${n} + ${delta} leaves the integers kv_incr keeps (±${Number.MAX_SAFE_INTEGER})`);
    }
    this.set(session, key, String(next));
    return next;
  }

  /** Sets `key` to `next` only if it holds `expected` (undefined: absent); guarded. */
  cas(session: string, key: string, expected: string | undefined, next: string | undefined): boolean {
    if (this.guardedRead(session, key) !== expected) return false;
    if (next === undefined) this.delete(session, key);
    else this.set(session, key, next);
    return true;
  }

  /**
   * Deletes the keys of `session` that belong to the sessions `ids` (a JSON array of strings, as
   * `idsJson`): `prefix + id` (byIdPrefix false), or every `prefix + id + ":" + suffix` (byIdPrefix
   * true; the id ends at the key's last ":"). Staged as ONE sweep the commit runs as one statement:
   * 10,000 ids cost one read (a count: what the host function returns) instead of 10,000 staged
   * keys crossing the host, the commit queue and SQL twice; a sweep that matches nothing is dropped.
   * Returns how many keys go, or -1 when not `counted` (no count is read).
   */
  deleteForSessions(session: string, prefix: string, idsJson: string, ids: readonly string[], byIdPrefix: boolean, counted = true): number {
    checkScope(session);
    checkPrefix(prefix);
    // Every such host call counts, staged or not: a counted one that matches nothing still reads
    // (and may merge the call's earlier sweeps): 200 of them held the thread for seconds (an outside probe).
    if (++this.callSweepCalls > KV_LIMITS.callSweeps) {
      throw new PluginCallError("quota", `kv: one call may make at most ${KV_LIMITS.callSweeps} kv_delete_sessions calls (give one sweep all its ids)`);
    }
    // Counted whether or not the sweep is staged: the ids are looked up either way.
    this.callSweepIds += ids.length;
    if (this.callSweepIds > KV_LIMITS.callSweepIds) {
      throw new PluginCallError("quota", `kv: one call's kv_delete_sessions sweeps may name at most ${KV_LIMITS.callSweepIds} ids in all`);
    }
    // Each sweep's list goes to SQL whole at commit, on the server's thread: bounded per call too.
    this.callSweepBytes += idsJson.length;
    if (this.callSweepBytes > KV_LIMITS.callSweepBytes) {
      throw new PluginCallError("quota", `kv: one call's kv_delete_sessions sweeps may hand over at most ${KV_LIMITS.callSweepBytes} characters of ids in all`);
    }
    const indexRanges = byIdPrefix ? this.rangeCheck(session, prefix, ids) : undefined;
    const sweep = new KvSweep(session, prefix, idsJson, ids, byIdPrefix);
    // Its ranges join the index once it is staged (one that matches nothing now is dropped).
    const stage = (gone?: number) => {
      this.stageSweep(sweep, gone);
      indexRanges?.(sweep);
    };
    if (!counted) {
      // Not counted (the caller does not want the number): counting reads every matching key once
      // more before the delete does (70,000 keys: about a fifth of a bulk clean-up). One seek tells
      // whether anything may match; if not, nothing is staged.
      if (this.stagedKeys(session, prefix).length > 0 || this.backend.hasPrefix(this.plugin, session, prefix)) stage();
      return -1;
    }
    const gone = this.sweptByCall(sweep);
    // Nothing stored or staged matches: no statement to run at commit.
    if (gone === 0) return 0;
    stage(gone);
    return gone;
  }

  /** Stages `sweep`; `gone` (counted sweeps) is how many keys it removes, credited towards the quota. */
  private stageSweep(sweep: KvSweep, gone = 0): void {
    // The call's earlier writes it matches become deletes: its later writes must win over it.
    for (const s of this.pending?.keys() ?? []) {
      const [session, key] = unslot(s);
      if (!sweep.matches(session, key)) continue;
      // A value of this call's: what it added goes, and it is one of `gone`.
      if (typeof this.pending!.get(s) === "string") {
        this.accountDelete(session, key, s);
        gone--;
      }
      this.pending!.set(s, null);
    }
    // The other keys it removes were stored (or are being committed): one key each (their bytes are
    // not read), so a call can sweep and then write as many new keys.
    if (gone > 0) this.callNet.keys -= gone;
    (this.pendingSweeps ??= []).push(sweep);
  }

  /**
   * How many keys `sweep` removes as this call sees them: one count of the stored keys it matches
   * that no earlier sweep still being committed hides, corrected by this process's few staged keys
   * (a staged value the count left out adds one, a staged delete of a counted key takes one away).
   */
  private sweptByCall(sweep: KvSweep): number {
    const { session, prefix } = sweep;
    const hiddenBy = this.sweepsHiding(sweep);
    let gone = this.backend.sweptCount(this.plugin, sweep, hiddenBy);
    const matched = [...new Set(this.stagedKeys(session, prefix))].filter((key) => sweep.matches(session, key));
    // Whether the count took them: stored and not hidden. One read for all of them (one read per
    // key was a round trip each on a server: 2,000 staged keys held the thread 2.8 s on sqld).
    const unhidden = matched.filter((key) => !hiddenBy.some((w) => w.matches(session, key)));
    const stored = unhidden.length === 0 ? new Set<string>() : this.backend.storedAmong(this.plugin, session, unhidden);
    for (const key of matched) gone += Number(this.staged(session, key) !== null) - Number(stored.has(key));
    return gone;
  }

  /**
   * Checks that a by-id-prefix sweep's key ranges (the keys starting with prefix + id + ":") repeat
   * or nest those of the call's other such sweeps in the scope at most MAX_NESTED_RANGES times in
   * all. The set-based delete walks each id's range, so ranges that repeat or nest (an id and that
   * id + ":" + more) walk the same keys again on the server's thread (2,000 copies of one range over
   * 6,000 keys: 15 s; an outside probe; copies within one list are dropped as they are read).
   * Sweeps of one prefix whose ids hold no ':' (a long list split in parts) can only repeat ids: told
   * by a set of the ids. Otherwise from the sorted range starts of the call's related sweeps (at most
   * MAX_OVERLAPPING_STARTS): a start within another follows it, with only starts within that one
   * between. Returns what the index takes once the sweep is staged.
   */
  private rangeCheck(session: string, prefix: string, ids: readonly string[]): ((sweep: KvSweep) => void) | undefined {
    const related = (this.pendingSweeps ?? []).filter((w) => w.byIdPrefix && w.session === session && (w.prefix.startsWith(prefix) || prefix.startsWith(w.prefix)));
    const colon = holdsColon(ids);
    if (!colon && related.length === 0) return undefined;
    const index = (this.callRanges ??= { ids: new Map(), starts: new Map(), indexed: new Set(), repeats: 0 });
    const tooMany = (n: number) => {
      if (n <= MAX_NESTED_RANGES) return;
      throw new PluginCallError(
        "trap",
        `kv_delete_sessions: more than ${MAX_NESTED_RANGES} ids of one call's sweeps by id prefix name keys another names too (the same id again, or that id + ":" + more): each walks those keys again; sweep them in separate calls`,
      );
    };
    if (!colon && related.every((w) => w.prefix === prefix && !holdsColon(w.ids))) {
      const key = `${session}\u0000${prefix}`;
      let seen = index.ids.get(key);
      if (!seen) index.ids.set(key, (seen = new Set(related.flatMap((w) => w.ids))));
      let repeats = index.repeats;
      for (const id of ids) if (seen.has(id)) tooMany(++repeats);
      return () => {
        for (const id of ids) seen.add(id);
        index.repeats = repeats;
      };
    }
    let starts = index.starts.get(session) ?? [];
    const add = (list: readonly string[], at: string) => {
      const more = [...new Set(list.filter((id) => id !== "").map((id) => at + id + ":"))];
      if (starts.length + more.length > MAX_OVERLAPPING_STARTS) {
        throw new PluginCallError("trap", `kv_delete_sessions: one call's sweeps by id prefix whose ids hold ':' or whose prefixes start alike may name at most ${MAX_OVERLAPPING_STARTS} ids in all`);
      }
      starts = mergeSorted(starts, more.sort());
    };
    for (const w of related) {
      if (index.indexed.has(w)) continue;
      index.indexed.add(w);
      add(w.ids, w.prefix);
    }
    index.starts.set(session, starts);
    add(ids, prefix);
    tooMany(nestedRanges(starts) + index.repeats);
    return (sweep) => {
      index.starts.set(session, starts);
      index.indexed.add(sweep);
    };
  }

  /**
   * The sweeps of this call and those still being committed that may match keys of `sweep` (same
   * scope, one prefix starting the other), merged per prefix and mode: each is one clause of the
   * count's statement, so their number is bounded.
   */
  private sweepsHiding(sweep: KvSweep): KvSweep[] {
    const groups = new Map<string, KvSweep[]>();
    const earlier = [...(this.pendingSweeps ?? []), ...[...this.unflushedSweeps].map((w) => w.sweep)];
    for (const w of earlier) {
      if (w.session !== sweep.session || !(w.prefix.startsWith(sweep.prefix) || sweep.prefix.startsWith(w.prefix))) continue;
      const group = JSON.stringify([w.prefix, w.byIdPrefix]);
      groups.set(group, [...(groups.get(group) ?? []), w]);
    }
    if (groups.size > MAX_HIDING_SWEEPS) {
      throw new PluginCallError("trap", `kv_delete_sessions: a counted sweep after more than ${MAX_HIDING_SWEEPS} other prefixes swept and not yet committed; sweep uncounted (mode bit 1)`);
    }
    let hidingIds = 0;
    let hidingChars = 0;
    for (const ws of groups.values()) for (const w of ws) (hidingIds += w.ids.length), (hidingChars += w.idsJson.length);
    if (hidingIds > MAX_HIDING_IDS || hidingChars > MAX_HIDING_CHARS) {
      throw new PluginCallError(
        "trap",
        `kv_delete_sessions: a counted sweep after sweeps of more than ${MAX_HIDING_IDS} ids (or ${MAX_HIDING_CHARS} characters of ids) in all under overlapping prefixes, not yet committed; sweep uncounted (mode bit 1), or give one sweep all the ids`,
      );
    }
    return [...groups.values()].map((ws) => {
      if (ws.length === 1) return ws[0]!;
      const ids = [...new Set(ws.flatMap((w) => w.ids))];
      return new KvSweep(sweep.session, ws[0]!.prefix, JSON.stringify(ids), ids, ws[0]!.byIdPrefix);
    });
  }

  /**
   * Keys of `session` starting with `prefix`, sorted; the call's own and unflushed writes count.
   * Refused as `memory` before the stored keys are read when they alone would pass `maxBytes` (the
   * answer could not be taken: reading and encoding 50 MB of keys held the thread for a second).
   */
  list(session: string, prefix: string, maxBytes = Infinity): string[] {
    checkScope(session);
    checkPrefix(prefix);
    const stored = this.backend.keys(this.plugin, session, prefix, maxBytes);
    if (stored === undefined) throw new PluginCallError("memory", `kv_list: the keys under "${prefix.slice(0, 40)}" hold more than ${maxBytes} bytes, the most one answer may hold (list by a longer prefix)`);
    // Nothing staged or under way: the stored keys, sorted, are the answer (100,000 keys each looked
    // up in the staged writes and sweeps took 130-190 ms of the thread).
    if (!this.pending && !this.pendingSweeps && this.unflushed.size === 0 && this.unflushedSweeps.size === 0) return stored;
    const keys = new Set<string>();
    const staged = this.stagedKeys(session, prefix);
    // Only sweeps of this scope whose prefix overlaps the listed one can take a listed key.
    const overlaps = (w: KvSweep) => w.session === session && (w.prefix.startsWith(prefix) || prefix.startsWith(w.prefix));
    const pendingSweeps = (this.pendingSweeps ?? []).filter(overlaps);
    const unflushedSweeps = [...this.unflushedSweeps].filter((w) => overlaps(w.sweep));
    const sweepIds = [...pendingSweeps, ...unflushedSweeps.map((w) => w.sweep)].reduce((n, w) => n + w.ids.length, 0);
    // What staged() says of each key (a staged key is written or being committed: not null means
    // it holds a value): each key matched against each sweep, or, when that is more work than
    // indexing the sweeps' ids once, looked up in that index (100,000 keys against 64 staged
    // sweeps held the thread 450-600 ms; indexing 500,000 ids for a list of nothing, 300 ms).
    const swept =
      (stored.length + staged.length) * (pendingSweeps.length + unflushedSweeps.length) > sweepIds
        ? { pending: SweepIndex.of(pendingSweeps.map((sweep) => ({ sweep, gen: 1 }))), unflushed: SweepIndex.of(unflushedSweeps) }
        : undefined;
    for (const key of stored) if (this.staged(session, key, swept) !== null) keys.add(key);
    for (const key of staged) if (this.staged(session, key, swept) !== null) keys.add(key);
    return [...keys].sort();
  }

  /** Keys of `session` starting with `prefix` that this process has staged writes for (any value). */
  private stagedKeys(session: string, prefix: string): string[] {
    const head = session + SEP + prefix;
    const out: string[] = [];
    for (const s of this.unflushed.keys()) if (s.startsWith(head)) out.push(s.slice(session.length + 1));
    for (const s of this.pending?.keys() ?? []) if (s.startsWith(head)) out.push(s.slice(session.length + 1));
    return out;
  }

  /**
   * Ends a call: hands its writes to the backend when it succeeded, drops them otherwise. Returns the
   * commit to wait for when the call holds guards (a conflict must fail the call); otherwise the
   * commit runs in the background and the runtime's flush() waits for it.
   */
  end(ok: boolean): Promise<void> | undefined {
    const pending: ReadonlyMap<string, string | null> = this.pending ?? NO_WRITES;
    const guards = this.guards;
    const sweeps = this.pendingSweeps ?? [];
    this.pending = undefined;
    this.guards = undefined;
    this.pendingSweeps = undefined;
    this.callRanges = undefined;
    // Counted towards the quota until committed as what the call adds (not what it stages).
    const bytes = Math.max(0, this.callNet.bytes);
    const adds = { keys: Math.max(0, this.callNet.keys), bytes };
    this.forgetReads();
    this.callBytes = 0;
    this.callNet = { keys: 0, bytes: 0 };
    this.slotNet = undefined;
    this.creditChecked = undefined;
    this.callSweepIds = 0;
    this.callSweepCalls = 0;
    this.callSweepBytes = 0;
    this.callGuardBytes = 0;
    if (!ok || (pending.size === 0 && sweeps.length === 0)) return undefined;
    // Counted towards the quota until committed: the backend's usage has them from then on.
    this.inFlight.bytes += bytes;
    const gen = ++this.gen;
    const writes: KvChangeSet["writes"] = [];
    let writesValue = false;
    for (const [s, value] of pending) {
      writes.push([...unslot(s), value]);
      if (value !== null) writesValue = true;
      const held = this.heldInFlight(s);
      if (value !== null && !held) this.inFlight.keys++;
      else if (value === null && held) this.inFlight.keys--;
      this.unflushed.set(s, { value, gen });
    }
    const swept = sweeps.map((sweep) => ({ sweep, gen }));
    for (const w of swept) this.unflushedSweeps.add(w);
    const guardList: KvChangeSet["guards"] = [];
    for (const [s, [value, afterSweeps]] of guards ?? []) guardList.push([...unslot(s), value, afterSweeps]);
    // Only a call that writes a value can add to the usage: deletes and sweeps never wait or fail
    // on the quota (a plugin over a quota the operator lowered must be able to delete its way back).
    const unchecked = this.uncheckedAdds;
    const quota =
      writesValue && (this.nearQuota() || unchecked.keys + adds.keys > this.quota.keys * QUOTA_CHECKED_SHARE || unchecked.bytes + adds.bytes > this.quota.bytes * QUOTA_CHECKED_SHARE)
        ? { ...this.quota }
        : undefined;
    const uncheckedNow = quota ? { keys: 0, bytes: 0 } : adds;
    unchecked.keys += uncheckedNow.keys;
    unchecked.bytes += uncheckedNow.bytes;
    const committed = this.backend.commit({ plugin: this.plugin, sweeps, writes, guards: guardList, ...(quota ? { quota } : {}) }).finally(() => {
      unchecked.keys -= uncheckedNow.keys;
      unchecked.bytes -= uncheckedNow.bytes;
      this.inFlight.bytes -= bytes;
      for (const s of pending.keys()) {
        const u = this.unflushed.get(s);
        if (u?.gen !== gen) continue; // a later call's write of the slot is still on its way
        if (u.value !== null) this.inFlight.keys--;
        this.unflushed.delete(s);
      }
      for (const w of swept) this.unflushedSweeps.delete(w);
    });
    if (guardList.length > 0 || quota) {
      return committed.catch((err: unknown) => {
        if (err instanceof KvConflictError) throw new PluginCallError("conflict", err.message);
        if (err instanceof KvQuotaError) throw new PluginCallError("quota", err.message);
        throw new PluginCallError("unavailable", `kv commit failed: ${(err as Error)?.message ?? err}`.slice(0, 500));
      });
    }
    committed.catch(() => undefined); // logged by the backend
    return undefined;
  }

  /**
   * Whether the plugin's writes in flight (this call's among them, once end() has counted them)
   * bring it within QUOTA_MARGIN of its quota, as this process knows it: then the commit checks
   * the quota again against what every process stored.
   */
  private nearQuota(): boolean {
    const usage = this.backend.usage(this.plugin);
    return usage.keys + this.inFlight.keys >= this.quota.keys * (1 - QUOTA_MARGIN) || usage.bytes + this.inFlight.bytes >= this.quota.bytes * (1 - QUOTA_MARGIN);
  }

  /** Reads `key` and remembers the value as this call's guard (the first read counts). */
  private guardedRead(session: string, key: string): string | undefined {
    checkSlot(session, key);
    const s = slot(session, key);
    const staged = this.staged(session, key);
    const read = this.reads?.get(s);
    const value = staged !== undefined ? (staged ?? undefined) : read !== undefined ? (read ?? undefined) : this.readStored(session, key);
    const guards = (this.guards ??= new Map());
    // A key the call already wrote guards nothing new: the guard taken before that write holds.
    if (!guards.has(s) && !this.pending?.has(s)) {
      // Each guard is held until the commit, which checks each: bounded like the call's writes.
      if (guards.size >= KV_LIMITS.callGuards) throw new PluginCallError("quota", `kv: one call may guard (kv_cas, kv_incr) at most ${KV_LIMITS.callGuards} keys`);
      // Its key (and a short expected value) go into the commit's JSON like a write's: the same bound
      // (32,000 guards on keys of 512 control characters made a 150 MB text: 1-3 s of the thread).
      this.callGuardBytes += utf8Length(session) + utf8Length(key) + (value !== undefined && value.length <= GUARD_VALUE_IN_SET_CHARS ? utf8Length(value) : 0);
      if (this.callGuardBytes > KV_LIMITS.callBytes) throw new PluginCallError("quota", `kv: one call may guard (kv_cas, kv_incr) keys of at most ${KV_LIMITS.callBytes} bytes in all`);
      guards.set(s, [value ?? null, this.pendingSweeps?.length ?? 0]);
    }
    return value;
  }

  private stage(session: string, key: string, value: string | null): void {
    const pending = (this.pending ??= new Map());
    const s = slot(session, key);
    pending.delete(s); // keep the last write's position: the commit applies them in order
    pending.set(s, value);
  }
}

const utf8Length = (text: string): number => Buffer.byteLength(text);

// NUL separates scope and key inside the overlay: neither may contain it.
function checkSlot(session: string, key: string): void {
  checkScope(session);
  if (key.length === 0 || Buffer.byteLength(key) > KV_LIMITS.keyBytes || key.includes("\u0000")) {
    throw new PluginCallError("trap", `kv keys must be 1..${KV_LIMITS.keyBytes} bytes without NUL`);
  }
}

function checkScope(session: string): void {
  if (session.length > KV_LIMITS.scopeBytes || Buffer.byteLength(session) > KV_LIMITS.scopeBytes || session.includes("\u0000")) {
    throw new PluginCallError("trap", `kv session scopes must be at most ${KV_LIMITS.scopeBytes} bytes without NUL`);
  }
}

function checkPrefix(prefix: string): void {
  if (Buffer.byteLength(prefix) > KV_LIMITS.keyBytes || prefix.includes("\u0000")) {
    throw new PluginCallError("trap", `kv prefixes must be at most ${KV_LIMITS.keyBytes} bytes without NUL`);
  }
}
