// Opens the libSQL database through Kysely: an embedded file by default, a remote sqld/Turso server
// when HOOKBOX_DB_URL is set. The same code path serves both.
//
// Durability (embedded file): WAL journal, and `db_synchronous` = "full" (default: every commit is
// fsynced before it is acknowledged; a power cut loses nothing acknowledged; the fsync runs off the
// server's thread, shared by the commits made meanwhile: wal-sync.ts) or "normal" (the WAL is
// fsynced only at checkpoints: commits are about 2x cheaper, the database stays consistent, but a
// power cut or OS crash can lose the last acknowledged commits; a process crash loses nothing).
import { accessSync, constants, existsSync, mkdtempSync, rmSync } from "node:fs";
import { makeDirs } from "../util/make-dirs.ts";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { Kysely, type Transaction } from "kysely";
import { LibsqlDialect } from "@libsql/kysely-libsql";
import { createClient, type Client, type InStatement, type ResultSet } from "@libsql/client";
import type { Database } from "./schema.ts";
import { migrate, migrationDb } from "./migrations.ts";
import { log } from "../log.ts";
import { Mutex } from "../util/mutex.ts";
import { FileBatchWriter, isReadingStep, type BatchItem } from "./file-batch.ts";
import { GroupCommit } from "./group-commit.ts";
import { AUTOCHECKPOINT_PAGES, IdleCheckpoint } from "./idle-checkpoint.ts";
import { retryLocked } from "./retry.ts";
import { WalSync } from "./wal-sync.ts";
import { openSyncReader, type FileReader, type SqlArg, type SyncReader } from "./sync-reader.ts";

export const DEFAULT_DB_URL = "file:./data/hookbox.db";

export type Durability = "full" | "normal";

export interface StorageOptions {
  authToken?: string | undefined;
  /** PRAGMA synchronous of the writer connection (embedded file only). */
  durability?: Durability | undefined;
}

export interface Storage {
  /** Reads (and the migrations); write through `write` or `batch`. */
  db: Kysely<Database>;
  client: Client;
  url: string;
  durability: Durability;
  /**
   * Runs `fn` in one write transaction. Write transactions are serialized in-process and run on one
   * writer connection (on the embedded file: the one that carries the durability setting); a second
   * BEGIN IMMEDIATE on another pooled connection would block the event loop on SQLite's file lock.
   */
  write<T>(fn: (trx: Transaction<Database>) => Promise<T>): Promise<T>;
  /**
   * Runs fixed statements as ONE write transaction in one call (one round trip to a remote server,
   * no Kysely compile; on the embedded file, statements prepared once and kept: file-batch.ts): for
   * hot write paths whose statements do not depend on each other's results in JS. Fixed SQL texts
   * (each is prepared once and kept) with positional arguments. Serialized with `write`; on the
   * embedded file the batches of one event-loop turn commit together at the end of that turn
   * (group-commit.ts), after a `write` begun in the same turn.
   */
  batch(stmts: BatchItem[]): Promise<ResultSet[]>;
  /** Syncs of the WAL that writes and batches waited for so far (embedded file with "full"; else 0). */
  walSyncs(): number;
  /** Why writes are no longer durable (a WAL sync failed: every write fails until a restart), else undefined. */
  durabilityFault(): string | undefined;
  /**
   * The database's synchronous reader (plugin KV and sessions:read: a WASM call cannot await; see
   * sync-reader.ts), opened at first use and closed with the storage.
   */
  syncReader(): SyncReader;
  /**
   * One fixed read statement of a hot path (a turn's session and history), rows as objects. On the
   * embedded file it runs on the synchronous reader, whose prepared statements are kept (the client
   * prepares every statement anew: about 100 us a read); on a server, through the client.
   */
  rows<T>(sql: string, args: readonly SqlArg[]): Promise<T[]>;
  /** Runs the WAL checkpoint now instead of at the next pause in writes (embedded file; the bench before a timed case). */
  checkpoint(): void;
  close(): Promise<void>;
}

// Root writes whatever a mode says (Deno's accessSync reads the mode bits alone: it would refuse),
// but not on a read-only mount (EROFS).
const canWrite = (path: string) => {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch (err) {
    return process.getuid?.() === 0 && (err as { code?: string }).code !== "EROFS";
  }
};

export async function openStorage(requested = DEFAULT_DB_URL, opts: StorageOptions = {}): Promise<Storage> {
  // An in-memory database lives in one connection, but plugin KV reads need a second one
  // (storage/sync-reader.ts): it is a private temporary file instead, removed on close.
  const scratch = isInMemory(requested) ? mkdtempSync(join(tmpdir(), "hookbox-mem-")) : undefined;
  const url = scratch ? `file:${join(scratch, "hookbox.db")}` : requested;
  const embedded = url.startsWith("file:");
  const path = embedded ? url.slice("file:".length) : "";
  // A new file is said, with its full path: a misspelt db_url otherwise starts on an empty database unnoticed.
  const created = embedded && !scratch && !existsSync(path);
  /** The database file as SQLite opened it (a symlinked or %-encoded path resolved), for the native connections. */
  let file = path;
  /** The same, when it runs in WAL mode (embedded file only). */
  let walFile = "";
  if (embedded) makeDirs(dirname(path));
  const durability = opts.durability ?? "full";
  // `timeout` is the busy timeout (ms) of every pooled connection, not only the first one, so
  // another process (e.g. the CLI next to a running server) waits for the lock instead of failing.
  const open = () => createClient(opts.authToken ? { url, authToken: opts.authToken } : { url, timeout: 5000 });
  const client = open();
  // The first statement is where an unreachable server or a bad path shows: say which database.
  await client.execute("select 1").catch((err: unknown) => {
    client.close();
    throw new Error(`cannot open the database ${redactUrl(url)}: ${(err as Error).message}${(err as { cause?: Error }).cause ? ` (${(err as { cause: Error }).cause.message})` : ""}`);
  });
  if (embedded) {
    // A file this process may read but not write opened, passed /readyz and answered every write
    // with a 500 (or failed here on a bare SQLITE_READONLY): said now, naming the file. Asked of the
    // file system, not by taking the write lock (another process may hold it meanwhile).
    const unwritable = [path, `${path}-wal`, `${path}-shm`, dirname(path)].find((p) => existsSync(p) && !canWrite(p));
    if (unwritable) {
      client.close();
      throw new Error(`the database ${resolve(path)} cannot be written by this process: ${resolve(unwritable)} is read-only to it (hookbox writes the database, its -wal and -shm files and their directory)`);
    }
    // The native connections (batches, the synchronous reader) open this file: the client decodes
    // %-escapes in the URL and SQLite follows links, so the raw path could name another file.
    file = String((await client.execute("select file from pragma_database_list where name = 'main'")).rows[0]?.[0] ?? "") || path;
    // 16 KiB pages (a new file only: an existing database keeps its size): a bulk delete touches
    // fewer pages and B-tree levels (100,000 sessions: about 12% faster than 4 KiB).
    await client.execute("PRAGMA page_size = 16384");
    // WAL lets readers proceed during a write; busy_timeout makes concurrent writers wait, not fail.
    const mode = await retryLocked(() => client.execute("PRAGMA journal_mode = WAL"));
    walFile = String(mode.rows[0]?.[0] ?? "").toLowerCase() === "wal" ? file : "";
    await client.execute("PRAGMA busy_timeout = 5000");
  }
  await client.execute("PRAGMA foreign_keys = ON");
  const db = new Kysely<Database>({ dialect: new LibsqlDialect({ client }) });
  await migrate(migrationDb(client));
  if (created) log("info", "created a new, empty database", { path: resolve(path) });
  // PRAGMA synchronous is per connection and cannot be set inside a transaction, and the client's
  // pool hands out any connection: every write goes through one dedicated writer connection instead.
  const writer = embedded ? createClient({ url, timeout: 5000, concurrency: 1 }) : client;
  // With "full", the writers commit without the fsync and a write is answered after the WAL's,
  // which runs off this thread, shared by the commits made meanwhile (wal-sync.ts).
  // (SQLite's own name for the file: a symlinked or %-encoded path is not where its WAL is; no WAL
  // mode, no sync of ours: SQLite's FULL then.)
  const walSync = durability === "full" && walFile !== "" ? WalSync.forDatabase(walFile) : undefined;
  const writerPragmas = writerPragmasFor(walSync ? "normal" : durability);
  if (embedded) for (const p of writerPragmas) await writer.execute(p);
  // Batches on the embedded file run on a native connection of their own that keeps its prepared
  // statements (file-batch.ts); serialized with `write` by the same lock.
  const fileBatch = embedded ? new FileBatchWriter(file, writerPragmas) : undefined;
  const checkpoints = fileBatch ? new IdleCheckpoint(() => fileBatch.checkpoint()) : undefined;
  const writerDb = writer === client ? db : new Kysely<Database>({ dialect: new LibsqlDialect({ client: writer }) });
  const writeLock = new Mutex();
  let reader: SyncReader | undefined;
  const syncReader = () => (reader ??= openSyncReader(embedded ? `file:${file}` : url, opts.authToken));
  // After a write (committed or not) the reader's next read starts a new snapshot: it sees it.
  const released = () => {
    reader?.release();
    checkpoints?.wrote();
  };
  // A committed write's result, once it is on disk (the lock is free meanwhile: the next one commits).
  const onDisk = async <T>(result: T): Promise<T> => {
    await walSync?.durable();
    return result;
  };
  const commitBatch = (stmts: BatchItem[]) =>
    writeLock.run(() => retryLocked(async () => (fileBatch ? fileBatch.batch(stmts) : serverBatch(writer, stmts))));
  // On the embedded file, batches of one event-loop turn share a transaction and its fsync.
  const grouped = fileBatch ? new GroupCommit(commitBatch, walSync && (() => walSync.durable())) : undefined;
  return {
    db,
    client,
    url,
    durability,
    write: (fn) => writeLock.run(() => retryLocked(() => writerDb.transaction().execute(fn))).then(onDisk).finally(released),
    batch: (stmts) => (grouped ? grouped.batch(stmts) : commitBatch(stmts)).finally(released),
    walSyncs: () => walSync?.syncs ?? 0,
    durabilityFault: () => walSync?.fault?.message,
    syncReader,
    async rows<T>(sql: string, args: readonly SqlArg[]): Promise<T[]> {
      // WAL: the reader's own connection sees every commit of any connection, like the client's.
      if (embedded) return (syncReader() as FileReader).objects(sql, args) as T[];
      const res = await client.execute({ sql, args: [...args] });
      return res.rows.map((r) => Object.fromEntries(res.columns.map((c, i) => [c, r[i]]))) as T[];
    },
    checkpoint: () => checkpoints?.now(),
    async close() {
      await walSync?.close();
      checkpoints?.close();
      reader?.close();
      fileBatch?.close();
      if (writerDb !== db) await writerDb.destroy();
      await db.destroy();
      writer.close();
      client.close();
      if (scratch) rmSync(scratch, { recursive: true, force: true });
    },
  };
}

/**
 * Settings of a writer connection on the embedded file: the durability, a 64 MiB cache ceiling
 * (a bulk delete of 100,000 sessions dirties tens of MB of pages; with SQLite's default 2 MB cache
 * they spill to the WAL mid-transaction and are re-read and re-written), and checkpoints mostly left
 * to pauses in writes (idle-checkpoint.ts).
 */
export function writerPragmasFor(durability: Durability): string[] {
  return [
    "PRAGMA foreign_keys = ON",
    `PRAGMA synchronous = ${durability === "full" ? "FULL" : "NORMAL"}`,
    "PRAGMA cache_size = -65536",
    `PRAGMA wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`,
    // A WAL that a burst grew is cut back to 64 MiB when it starts over (it never shrinks otherwise).
    "PRAGMA journal_size_limit = 67108864",
  ];
}

/** A batch on a server: each reading step as its statements, one ResultSet per item (a step's last). */
async function serverBatch(writer: Client, items: readonly BatchItem[]): Promise<ResultSet[]> {
  if (!items.some(isReadingStep)) return writer.batch(items as InStatement[], "write");
  const ends: number[] = [];
  const stmts: InStatement[] = [];
  for (const item of items) {
    if (isReadingStep(item)) stmts.push(...item.statements);
    else stmts.push(item);
    ends.push(stmts.length - 1);
  }
  const results = await writer.batch(stmts, "write");
  return ends.map((i) => results[i]!);
}

function isInMemory(url: string): boolean {
  if (!url.startsWith("file:")) return false;
  const path = url.slice("file:".length);
  return path === "" || path === ":memory:" || path.startsWith(":memory:?");
}

/** A URL fit for a log or an error: no credentials. */
function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, "//***@").replace(/([?&](authToken|token)=)[^&]*/gi, "$1***");
}
