// A plugin's KV namespace. Host functions are synchronous inside an in-thread WASM call, so the
// namespace lives in memory (loaded from plugin_kv at plugin load); a call's writes are buffered and
// applied only when the call succeeds (a failed call leaves nothing half-written), then persisted to
// libSQL in the background, in order. `flush()` waits for the writes made so far.
import { sql } from "kysely";
import { PluginCallError } from "../hooks/failures.ts";
import { log } from "../runtime/log.ts";
import type { Storage } from "../runtime/storage/db.ts";

export const KV_LIMITS = { keyBytes: 512, valueBytes: 256 * 1024 } as const;

type Scope = Map<string, string>;
/** Pending writes of the current call: scope -> key -> value (null = delete). */
type Pending = Map<string, Map<string, string | null>>;

export class PluginKv {
  private readonly scopes = new Map<string, Scope>();
  private pending: Pending | undefined;
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    readonly plugin: string,
    private readonly storage: Storage,
    private readonly now: () => number,
  ) {}

  static async load(plugin: string, storage: Storage, now: () => number): Promise<PluginKv> {
    const kv = new PluginKv(plugin, storage, now);
    const rows = await storage.db.selectFrom("plugin_kv").select(["session_id", "key", "value"]).where("plugin", "=", plugin).execute();
    for (const r of rows) kv.scope(r.session_id, true)!.set(r.key, r.value);
    return kv;
  }

  get(session: string, key: string): string | undefined {
    const p = this.pending?.get(session);
    if (p?.has(key)) return p.get(key) ?? undefined;
    return this.scopes.get(session)?.get(key);
  }

  set(session: string, key: string, value: string): void {
    checkKey(key);
    if (value.length * 3 > KV_LIMITS.valueBytes && Buffer.byteLength(value) > KV_LIMITS.valueBytes) {
      throw new PluginCallError("trap", `kv value for "${key.slice(0, 40)}" exceeds ${KV_LIMITS.valueBytes} bytes`);
    }
    this.stage(session).set(key, value);
  }

  delete(session: string, key: string): void {
    checkKey(key);
    this.stage(session).set(key, null);
  }

  /**
   * Deletes, in one step, the keys of `session` that belong to the sessions `ids`: `prefix + id`
   * (byIdPrefix false), or every `prefix + id + ":" + suffix` (byIdPrefix true; the id ends at the
   * key's last ":"). Returns how many keys it deleted. Costs O(ids) or O(keys in the scope), never
   * ids x keys, and one host call instead of one per key.
   */
  deleteForSessions(session: string, prefix: string, ids: readonly string[], byIdPrefix: boolean): number {
    const stage = this.stage(session);
    let n = 0;
    if (!byIdPrefix) {
      for (const id of ids) {
        const key = prefix + id;
        if (this.get(session, key) === undefined) continue;
        stage.set(key, null);
        n++;
      }
      return n;
    }
    const wanted = new Set(ids);
    for (const key of this.list(session, prefix)) {
      const colon = key.lastIndexOf(":");
      if (colon <= prefix.length || !wanted.has(key.slice(prefix.length, colon))) continue;
      stage.set(key, null);
      n++;
    }
    return n;
  }

  /** Keys of `session` starting with `prefix`, sorted. */
  list(session: string, prefix: string): string[] {
    const keys = new Set<string>();
    for (const k of this.scopes.get(session)?.keys() ?? []) if (k.startsWith(prefix)) keys.add(k);
    for (const [k, v] of this.pending?.get(session) ?? []) {
      if (!k.startsWith(prefix)) continue;
      if (v === null) keys.delete(k);
      else keys.add(k);
    }
    return [...keys].sort();
  }

  /** Ends a call: applies its writes when it succeeded, drops them otherwise. */
  end(ok: boolean): void {
    const pending = this.pending;
    this.pending = undefined;
    if (!ok || !pending) return;
    // The map holds the whole namespace, so it knows which writes change nothing (a delete of an
    // absent key, a set to the same value): those skip the database, where each call's writes
    // would otherwise cost a transaction (a bulk delete's clean-up deletes mostly absent keys).
    const changes: Pending = new Map();
    for (const [session, writes] of pending) {
      for (const [key, value] of writes) {
        const current = this.scope(session)?.get(key);
        if (value === null ? current === undefined : current === value) continue;
        if (value === null) this.scope(session)!.delete(key);
        else this.scope(session, true)!.set(key, value);
        let c = changes.get(session);
        if (!c) changes.set(session, (c = new Map()));
        c.set(key, value);
      }
    }
    if (changes.size > 0) this.persist(changes);
  }

  /** The core deleted these sessions' rows (with their session-scoped KV): forget them too. */
  dropSessions(ids: readonly string[]): void {
    for (const id of ids) if (id !== "") this.scopes.delete(id);
  }

  flush(): Promise<void> {
    return this.writing;
  }

  private stage(session: string): Map<string, string | null> {
    const pending = (this.pending ??= new Map());
    let s = pending.get(session);
    if (!s) pending.set(session, (s = new Map()));
    return s;
  }

  private scope(session: string, create = false): Scope | undefined {
    let s = this.scopes.get(session);
    if (!s && create) this.scopes.set(session, (s = new Map()));
    return s;
  }

  private persist(changes: Pending): void {
    this.writing = KvWriter.of(this.storage).enqueue({ kv: this, changes, updated_at: this.now() });
  }
}

interface Batch {
  kv: PluginKv;
  changes: Pending;
  updated_at: number;
}

/**
 * Group commit for every plugin's KV on one database: the changes queued while a transaction runs
 * go into the next one together, so a fan-out whose ten plugins each write costs about one libSQL
 * transaction, not ten. FIFO, so each plugin's writes land in the order its calls ended.
 */
class KvWriter {
  private static readonly writers = new WeakMap<Storage, KvWriter>();
  private queue: Batch[] = [];
  private draining: Promise<void> | undefined;

  private constructor(private readonly storage: Storage) {}

  static of(storage: Storage): KvWriter {
    let w = KvWriter.writers.get(storage);
    if (!w) KvWriter.writers.set(storage, (w = new KvWriter(storage)));
    return w;
  }

  /** Resolves once these changes (and any queued with them) are committed or logged as failed. */
  enqueue(batch: Batch): Promise<void> {
    this.queue.push(batch);
    return (this.draining ??= this.drain());
  }

  private async drain(): Promise<void> {
    // Let the rest of the fan-out queue its writes before the first transaction starts.
    await Promise.resolve();
    while (this.queue.length > 0) {
      const batches = this.queue;
      this.queue = [];
      try {
        // storage.write serializes with the core's write transactions (a second writer would block
        // the event loop on SQLite's file lock).
        const gone = await this.storage.write(async (trx) => {
          const gone = new Set<string>();
          const alive = new Set<string>();
          for (const { kv, changes, updated_at } of batches) {
            const plugin = kv.plugin;
            for (const [session_id, writes] of changes) {
              // The session may have been deleted (with its KV rows) after the call began, e.g. by a
              // delete committed while post_compaction was still fanning out: write nothing for it.
              if (session_id !== "" && !alive.has(session_id)) {
                if (gone.has(session_id)) continue;
                const row = await trx.selectFrom("sessions").select("id").where("id", "=", session_id).executeTakeFirst();
                if (!row) {
                  gone.add(session_id);
                  continue;
                }
                alive.add(session_id);
              }
              // Deletes are set-based: a bulk delete's clean-up removes thousands of keys per plugin.
              const deleted = [...writes].filter(([, value]) => value === null).map(([key]) => key);
              if (deleted.length > 0) {
                await sql`delete from plugin_kv where plugin = ${plugin} and session_id = ${session_id}
                  and key in (select value from json_each(${JSON.stringify(deleted)}))`.execute(trx);
              }
              for (const [key, value] of writes) {
                if (value === null) continue;
                await trx
                  .insertInto("plugin_kv")
                  .values({ plugin, session_id, key, value, updated_at })
                  .onConflict((oc) => oc.columns(["plugin", "session_id", "key"]).doUpdateSet({ value, updated_at }))
                  .execute();
              }
            }
          }
          return [...gone];
        });
        if (gone.length > 0) for (const { kv } of batches) kv.dropSessions(gone);
      } catch (err) {
        const plugins = [...new Set(batches.map((b) => b.kv.plugin))];
        log("error", "plugin kv write failed", { plugins, error: (err as Error).message });
      }
    }
    this.draining = undefined;
  }
}

function checkKey(key: string): void {
  if (key.length === 0 || Buffer.byteLength(key) > KV_LIMITS.keyBytes) {
    throw new PluginCallError("trap", `kv keys must be 1..${KV_LIMITS.keyBytes} bytes`);
  }
}
