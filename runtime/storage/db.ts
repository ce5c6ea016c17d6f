// Opens the libSQL database through Kysely: an embedded file by default, a remote sqld/Turso server
// when HOOKBOX_DB_URL is set. The same code path serves both.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { Kysely, type Transaction } from "kysely";
import { LibsqlDialect } from "@libsql/kysely-libsql";
import { createClient, type Client } from "@libsql/client";
import type { Database } from "./schema.ts";
import { migrate } from "./migrations.ts";
import { Mutex } from "../util/mutex.ts";

export const DEFAULT_DB_URL = "file:./data/hookbox.db";

export interface Storage {
  db: Kysely<Database>;
  client: Client;
  url: string;
  /**
   * Runs `fn` in one write transaction. Write transactions are serialized in-process: the embedded
   * client gives each transaction its own pooled connection, and a second BEGIN IMMEDIATE would
   * block the event loop on SQLite's file lock. Every write that must be atomic goes through here.
   */
  write<T>(fn: (trx: Transaction<Database>) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export async function openStorage(url = DEFAULT_DB_URL, authToken?: string): Promise<Storage> {
  if (url.startsWith("file:")) {
    const path = url.slice("file:".length);
    if (path && path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  }
  // `timeout` is the busy timeout (ms) of every pooled connection, not only the first one, so
  // another process (e.g. the CLI next to a running server) waits for the lock instead of failing.
  const client = createClient(authToken ? { url, authToken } : { url, timeout: 5000 });
  if (url.startsWith("file:")) {
    // WAL lets readers proceed during a write; busy_timeout makes concurrent writers wait, not fail.
    await client.execute("PRAGMA journal_mode = WAL");
    await client.execute("PRAGMA busy_timeout = 5000");
  }
  await client.execute("PRAGMA foreign_keys = ON");
  const db = new Kysely<Database>({ dialect: new LibsqlDialect({ client }) });
  await migrate(db);
  const writeLock = new Mutex();
  return {
    db,
    client,
    url,
    write: (fn) => writeLock.run(() => db.transaction().execute(fn)),
    async close() {
      await db.destroy();
      client.close();
    },
  };
}
