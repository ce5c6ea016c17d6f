// Schema migrations, kept in code so that Node, Deno and a remote libSQL server all run the same set.
import { LibsqlDialect } from "@libsql/kysely-libsql";
import { Kysely, Migrator, SqliteAdapter, sql, type Migration, type MigrationProvider } from "kysely";
import type { Client } from "@libsql/client";
import { retryLocked } from "./retry.ts";

/**
 * SQLite's DDL is transactional, but Kysely's SqliteAdapter says it is not, so its Migrator ran
 * every statement on its own: a process killed half-way through left tables that no later start
 * could create again ("table sessions already exists"), on every node of a shared database (an
 * outside probe). Run through this adapter, the pending migrations and their records commit together.
 */
class TransactionalDdlAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}
class MigrationDialect extends LibsqlDialect {
  override createAdapter() {
    return new TransactionalDdlAdapter();
  }
}

/** A Kysely over `client` whose migrations run in one transaction (see TransactionalDdlAdapter). */
export const migrationDb = (client: Client): Kysely<any> => new Kysely<any>({ dialect: new MigrationDialect({ client }) });

const migrations: Record<string, Migration> = {
  "0001_initial": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("sessions")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("profile", "text", (c) => c.notNull().defaultTo("default"))
        .addColumn("platform", "text", (c) => c.notNull().defaultTo("api"))
        .addColumn("user_id", "text")
        .addColumn("chat_id", "text")
        .addColumn("thread_id", "text")
        .addColumn("parent_session_id", "text")
        .addColumn("compacted_from", "text")
        .addColumn("archived", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("ended_at", "integer")
        .addColumn("end_reason", "text")
        .addColumn("token_estimate", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("last_compaction_at", "integer")
        .addColumn("created_at", "integer", (c) => c.notNull())
        .addColumn("updated_at", "integer", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("sessions_parent").on("sessions").column("parent_session_id").execute();
      await db.schema.createIndex("sessions_compacted_from").on("sessions").column("compacted_from").execute();
      await db.schema.createIndex("sessions_profile_updated").on("sessions").columns(["profile", "updated_at"]).execute();

      await db.schema
        .createTable("messages")
        .addColumn("id", "integer", (c) => c.primaryKey().autoIncrement())
        .addColumn("session_id", "text", (c) => c.notNull())
        .addColumn("seq", "integer", (c) => c.notNull())
        .addColumn("role", "text", (c) => c.notNull())
        .addColumn("content", "text", (c) => c.notNull())
        .addColumn("tool_name", "text")
        .addColumn("tokens", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("created_at", "integer", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("messages_session_seq").on("messages").columns(["session_id", "seq"]).unique().execute();

      await db.schema
        .createTable("plugin_kv")
        .addColumn("plugin", "text", (c) => c.notNull())
        .addColumn("session_id", "text", (c) => c.notNull().defaultTo(""))
        .addColumn("key", "text", (c) => c.notNull())
        .addColumn("value", "text", (c) => c.notNull())
        .addColumn("updated_at", "integer", (c) => c.notNull())
        .addPrimaryKeyConstraint("plugin_kv_pk", ["plugin", "session_id", "key"])
        .execute();

      await db.schema
        .createTable("idempotency")
        .addColumn("key", "text", (c) => c.primaryKey())
        .addColumn("request_hash", "text", (c) => c.notNull())
        .addColumn("status", "integer", (c) => c.notNull())
        .addColumn("response", "text", (c) => c.notNull())
        .addColumn("created_at", "integer", (c) => c.notNull())
        .execute();

      await db.schema
        .createTable("plugin_state")
        .addColumn("name", "text", (c) => c.primaryKey())
        .addColumn("enabled", "integer")
        .addColumn("quarantined", "text")
        .addColumn("updated_at", "integer", (c) => c.notNull())
        .execute();
    },
  },
  // Every list order and filter of GET /v1/sessions is served by an index (keyset paging on
  // (created_at, id), optionally under profile and/or archived), so listing at 100,000 sessions costs
  // what it costs on an empty database; test/storage-plans.test.ts checks the query plans.
  // (profile, updated_at) served no query and was rewritten on every turn: dropped.
  // plugin_kv's primary key starts with plugin: the clean-up of deleted sessions needs session_id.
  "0002_list_indexes": {
    async up(db: Kysely<any>) {
      await db.schema.dropIndex("sessions_profile_updated").execute();
      await db.schema.createIndex("sessions_list").on("sessions").columns(["created_at", "id"]).execute();
      await db.schema.createIndex("sessions_list_archived").on("sessions").columns(["archived", "created_at", "id"]).execute();
      await db.schema.createIndex("sessions_list_profile").on("sessions").columns(["profile", "created_at", "id"]).execute();
      await db.schema
        .createIndex("sessions_list_profile_archived")
        .on("sessions")
        .columns(["profile", "archived", "created_at", "id"])
        .execute();
      await db.schema.createIndex("plugin_kv_session").on("plugin_kv").columns(["session_id"]).execute();
    },
  },
  // Plugin state shared by several processes (issue 8): per-plugin KV usage kept by triggers (the
  // quota check reads one row), and tombstones of deleted sessions (their KV stays readable during
  // on_session_delete and is purged after it, or by the sweep if that process died). A turn's
  // append requires the history it read by its last seq (sessions/service.ts), no column needed.
  "0003_shared_state": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("plugin_kv_usage")
        .addColumn("plugin", "text", (c) => c.primaryKey())
        .addColumn("keys", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("bytes", "integer", (c) => c.notNull().defaultTo(0))
        .execute();
      await sql`insert into plugin_kv_usage (plugin, keys, bytes)
        select plugin, count(*), sum(length(cast(key as blob)) + length(cast(value as blob))) from plugin_kv group by plugin`.execute(db);
      await createUsageTriggers(db);
      await db.schema
        .createTable("session_tombstones")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("deleted_at", "integer", (c) => c.notNull())
        .execute();
    },
  },
  // plugin_kv_session serves only the clean-up of deleted sessions, i.e. session-scoped rows; the
  // plugin-wide rows (session_id '', most of a seed plugin's index) paid an index entry each for
  // nothing: deleting 70,000 of them cost 10-25% more (one B-tree more per row). Queries that need
  // it say `session_id <> ''` so the planner can use the partial index.
  "0004_plugin_kv_session_partial": {
    async up(db: Kysely<any>) {
      await db.schema.dropIndex("plugin_kv_session").execute();
      await db.schema.createIndex("plugin_kv_session").on("plugin_kv").column("session_id").where(sql.ref("session_id"), "<>", "").execute();
    },
  },
  // plugin_kv clustered by its primary key (WITHOUT ROWID): a plugin's keys lie together whatever
  // order they were written in, so a bulk clean-up frees whole pages instead of touching every page
  // of the table (rows of several plugins interleave by rowid), and each row is one B-tree entry, not
  // a table row plus an index entry. Dropping the table drops its triggers; they are made again.
  "0005_plugin_kv_clustered": {
    async up(db: Kysely<any>) {
      await sql`create table plugin_kv_clustered (plugin text not null, session_id text not null default '', key text not null,
        value text not null, updated_at integer not null, primary key (plugin, session_id, key)) without rowid`.execute(db);
      await sql`insert into plugin_kv_clustered (plugin, session_id, key, value, updated_at)
        select plugin, session_id, key, value, updated_at from plugin_kv`.execute(db);
      await sql`drop table plugin_kv`.execute(db);
      await sql`alter table plugin_kv_clustered rename to plugin_kv`.execute(db);
      await db.schema.createIndex("plugin_kv_session").on("plugin_kv").column("session_id").where(sql.ref("session_id"), "<>", "").execute();
      await createUsageTriggers(db);
    },
  },
  // An Idempotency-Key replay answers with the stored response's own content type: a streamed turn
  // (text/event-stream) came back labelled application/json before.
  "0006_idempotency_content_type": {
    async up(db: Kysely<any>) {
      await db.schema.alterTable("idempotency").addColumn("content_type", "text", (c) => c.notNull().defaultTo("application/json")).execute();
    },
  },
  // Fewer index entries per session, so a bulk delete (and each new session) writes fewer B-trees:
  // lists without an archived filter merge the archived=0 and archived=1 ranges of the indexes that
  // start with archived (sessions/service.ts listQuery), so the two list indexes without archived go;
  // parent and compaction links are indexed only where set (the lookups are equalities, which the
  // partial indexes serve), not once per session with NULL. archived is 0 or 1 (anything else read
  // as "not archived" before: made 0, so that row stays in the lists). Every step can run again
  // (written when migrations ran outside a transaction; now they commit together: migrationDb).
  "0007_lean_session_indexes": {
    async up(db: Kysely<any>) {
      await sql`update sessions set archived = 0 where archived not in (0, 1)`.execute(db);
      await db.schema.dropIndex("sessions_list").ifExists().execute();
      await db.schema.dropIndex("sessions_list_profile").ifExists().execute();
      await db.schema.dropIndex("sessions_parent").ifExists().execute();
      await db.schema.dropIndex("sessions_compacted_from").ifExists().execute();
      await db.schema.createIndex("sessions_parent").on("sessions").column("parent_session_id").where(sql.ref("parent_session_id"), "is not", null).execute();
      await db.schema.createIndex("sessions_compacted_from").on("sessions").column("compacted_from").where(sql.ref("compacted_from"), "is not", null).execute();
    },
  },
  // Tombstones clustered by id (WITHOUT ROWID): a bulk delete writes one B-tree entry per deleted
  // session, not a table row plus its primary key's index entry (100,000 sessions: 47 -> 17 ms).
  // Each step can run again (written when migrations ran outside a transaction; now they commit
  // together): the copy keeps the rows already copied, and the old table goes only once the copy has them all.
  "0008_tombstones_clustered": {
    async up(db: Kysely<any>) {
      await sql`create table if not exists session_tombstones_clustered (id text primary key not null, deleted_at integer not null) without rowid`.execute(db);
      if (await tableExists(db, "session_tombstones")) {
        await sql`insert into session_tombstones_clustered (id, deleted_at) select id, deleted_at from session_tombstones where true
          on conflict (id) do update set deleted_at = max(deleted_at, excluded.deleted_at)`.execute(db);
        await sql`drop table session_tombstones`.execute(db);
      }
      await sql`alter table session_tombstones_clustered rename to session_tombstones`.execute(db);
    },
  },
  // The key patterns plugins clean deleted sessions' plugin-wide state by (their
  // hookbox_kv_delete_sessions sweeps), so the sweep can re-apply them: a write that commits just
  // after another process deleted the session and swept it would otherwise stay for good.
  "0009_kv_sweep_patterns": {
    async up(db: Kysely<any>) {
      await sql`create table if not exists kv_sweep_patterns (plugin text not null, session_id text not null, prefix text not null,
        by_id_prefix integer not null, primary key (plugin, session_id, prefix, by_id_prefix)) without rowid`.execute(db);
    },
  },
  // Deletes take their rows off plugin_kv_usage themselves (runtime/storage/kv-usage.ts): the delete
  // trigger made every multi-row delete two-pass and ran once per row, about 5x the delete itself
  // when on_session_delete cleaned up 70,000 keys. A process of an older version on the same
  // database would delete without counting: upgrade every process together.
  "0010_kv_usage_without_delete_trigger": {
    async up(db: Kysely<any>) {
      await sql`drop trigger if exists plugin_kv_usage_delete`.execute(db);
    },
  },
};

const tableExists = async (db: Kysely<any>, name: string) =>
  (await sql`select 1 from sqlite_master where type = 'table' and name = ${name}`.execute(db)).rows.length > 0;

/** Per-plugin KV usage kept by triggers (the delete trigger was dropped again by 0010: deletes count themselves). */
async function createUsageTriggers(db: Kysely<any>): Promise<void> {
  await sql`create trigger plugin_kv_usage_insert after insert on plugin_kv begin
    insert into plugin_kv_usage (plugin, keys, bytes) values (new.plugin, 1, length(cast(new.key as blob)) + length(cast(new.value as blob)))
    on conflict (plugin) do update set keys = keys + 1, bytes = bytes + excluded.bytes;
  end`.execute(db);
  await sql`create trigger plugin_kv_usage_delete after delete on plugin_kv begin
    update plugin_kv_usage set keys = keys - 1, bytes = bytes - length(cast(old.key as blob)) - length(cast(old.value as blob)) where plugin = old.plugin;
  end`.execute(db);
  await sql`create trigger plugin_kv_usage_update after update of value on plugin_kv begin
    update plugin_kv_usage set bytes = bytes + length(cast(new.value as blob)) - length(cast(old.value as blob)) where plugin = new.plugin;
  end`.execute(db);
}

const provider: MigrationProvider = { getMigrations: async () => migrations };

/**
 * Brings the schema up to date. A database already at the latest migration is only read (a restart,
 * or the CLI next to a running server, takes no write lock). Several processes may start at once on
 * a fresh database (Kysely's SQLite lock is a no-op): a lease row in hookbox_migration_lock, taken
 * with one atomic statement, lets one process migrate while the others wait, reading the lease
 * rather than writing for it (writers polling for the lock starved the one migrating); then each
 * finds nothing left to do. `to` stops at that migration (tests of a migration's data path).
 */
export async function migrate(db: Kysely<any>, to?: string): Promise<void> {
  if (to === undefined && (await upToDate(db))) return;
  await retryLocked(() => sql`create table if not exists hookbox_migration_lock (id integer primary key check (id = 1), holder text not null, expires_at integer not null)`.execute(db));
  const holder = crypto.randomUUID();
  const deadline = Date.now() + 60_000;
  for (;;) {
    const now = Date.now();
    const lease = await sql<{ expires_at: number }>`select expires_at from hookbox_migration_lock`.execute(db).catch(() => undefined);
    // Taken when absent or when a crashed holder's lease ran out.
    const free = lease !== undefined && (lease.rows.length === 0 || Number(lease.rows[0]!.expires_at) < now);
    const got = free
      ? await sql<{ holder: string }>`
          insert into hookbox_migration_lock (id, holder, expires_at) values (1, ${holder}, ${now + 30_000})
          on conflict (id) do update set holder = excluded.holder, expires_at = excluded.expires_at
          where hookbox_migration_lock.expires_at < ${now}
          returning holder`.execute(db).catch(() => ({ rows: [] }))
      : { rows: [] };
    if (got.rows[0]?.holder === holder) break;
    if (now > deadline) throw new Error("migration lock: another process has held it for 60 s");
    await new Promise((r) => setTimeout(r, 20 + Math.random() * 80));
  }
  try {
    const migrator = new Migrator({ db, provider });
    const { error, results } = await (to === undefined ? migrator.migrateToLatest() : migrator.migrateTo(to));
    const failed = results?.find((r) => r.status === "Error");
    if (error || failed) throw new Error(`migration ${failed?.migrationName ?? ""} failed: ${String(error)}`);
  } finally {
    await retryLocked(() => sql`delete from hookbox_migration_lock where holder = ${holder}`.execute(db));
  }
}

/** True when the database recorded exactly the known migrations (one it does not know goes to the Migrator, which says so). */
async function upToDate(db: Kysely<any>): Promise<boolean> {
  const names = Object.keys(migrations);
  const counted = await sql<{ all: number; known: number }>`select count(*) as "all", count(case when name in (${sql.join(names)}) then 1 end) as known from kysely_migration`
    .execute(db)
    .catch(() => undefined);
  const row = counted?.rows[0];
  return row !== undefined && Number(row.all) === names.length && Number(row.known) === names.length;
}
