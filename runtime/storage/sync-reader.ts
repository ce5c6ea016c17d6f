// Synchronous reads of the shared database, for host functions that must answer inside a running
// WASM call (plugin KV). Two implementations behind one interface:
//   - an embedded file: a native libsql connection of our own (the driver @libsql/client uses for
//     file: URLs), in WAL mode, so a read sees every commit of any process: ~20 µs;
//   - a libSQL server: a worker thread with its own @libsql/client over a WebSocket; the caller posts
//     the query and blocks on Atomics.wait until the worker has put the rows in shared memory.
// Both read committed data only: the database stays the one source of truth for every process.
import { Worker } from "node:worker_threads";
import { openNative, StatementCache, type NativeDatabase, type SqlArg } from "./native.ts";

export type { SqlArg } from "./native.ts";

export interface SyncReader {
  /** Rows as arrays of column values, in select order. */
  all(sql: string, args: readonly SqlArg[]): unknown[][];
  /** The first row only (a point read), undefined when there is none. */
  one(sql: string, args: readonly SqlArg[]): unknown[] | undefined;
  /** Queries run so far (on a server: round trips). */
  readonly reads: number;
  close(): void;
}

export function openSyncReader(url: string, authToken?: string): SyncReader {
  return url.startsWith("file:") ? new FileReader(url.slice("file:".length)) : new RemoteReader(url, authToken);
}

export class FileReader implements SyncReader {
  reads = 0;
  private readonly db: NativeDatabase;
  private readonly statements: StatementCache;
  private readonly objectStatements: StatementCache;

  constructor(path: string) {
    this.db = openNative(path);
    this.db.exec("PRAGMA query_only = 1");
    this.statements = new StatementCache(this.db, true);
    this.objectStatements = new StatementCache(this.db, false);
  }

  all(sql: string, args: readonly SqlArg[]): unknown[][] {
    this.reads++;
    return this.statements.get(sql).all(args) as unknown[][];
  }

  // The native get() skips all()'s row iterator: ~8 us a point read against ~13.
  one(sql: string, args: readonly SqlArg[]): unknown[] | undefined {
    this.reads++;
    return this.statements.get(sql).get(args) as unknown[] | undefined;
  }

  /** Rows as objects keyed by column name. */
  objects(sql: string, args: readonly SqlArg[]): Array<Record<string, unknown>> {
    this.reads++;
    return this.objectStatements.get(sql).all(args) as Array<Record<string, unknown>>;
  }

  close(): void {
    this.statements.clear();
    this.objectStatements.clear();
    this.db.close();
  }
}

/** Results up to this size cross from the worker (a plugin's key list or one 256 KiB value fit easily). */
const RESULT_BYTES = 16 * 1024 * 1024;
/**
 * A read blocks the event loop while it waits, so a server that hangs must not hold it long: a read
 * gives up after READ_TIMEOUT_MS, and for DOWN_MS after that, reads fail at once instead of waiting.
 */
const READ_TIMEOUT_MS = 2_000;
const DOWN_MS = 5_000;

class RemoteReader implements SyncReader {
  reads = 0;
  private readonly worker: Worker;
  /** [answers so far, result byte length, id of the request answered, 1 rows / 2 error] */
  private readonly ctl = new Int32Array(new SharedArrayBuffer(16));
  private lastId = 0;
  private downUntil = 0;
  private readonly data = new SharedArrayBuffer(RESULT_BYTES);

  constructor(url: string, authToken: string | undefined) {
    this.worker = new Worker(new URL("./sync-reader-worker.mjs", import.meta.url), {
      workerData: { url, authToken, ctl: this.ctl.buffer, data: this.data },
    });
    this.worker.unref();
  }

  all(sql: string, args: readonly SqlArg[]): unknown[][] {
    this.reads++;
    const now = Date.now();
    if (now < this.downUntil) throw new Error(`database read refused: the server did not answer a read within ${READ_TIMEOUT_MS} ms; retrying after ${DOWN_MS} ms`);
    const id = (this.lastId = (this.lastId % 0x7fffffff) + 1);
    let seen = Atomics.load(this.ctl, 0);
    this.worker.postMessage({ id, sql, args });
    const deadline = now + READ_TIMEOUT_MS;
    // A late answer to an earlier, abandoned read may come first: wait on for ours.
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0 || Atomics.wait(this.ctl, 0, seen, left) === "timed-out") {
        this.downUntil = Date.now() + DOWN_MS;
        throw new Error(`database read timed out after ${READ_TIMEOUT_MS} ms`);
      }
      seen = Atomics.load(this.ctl, 0);
      if (Atomics.load(this.ctl, 2) === id) break;
    }
    const text = new TextDecoder().decode(new Uint8Array(this.data, 0, this.ctl[1]).slice());
    if (this.ctl[3] === 2) throw new Error(`database read failed: ${text}`);
    return JSON.parse(text) as unknown[][];
  }

  one(sql: string, args: readonly SqlArg[]): unknown[] | undefined {
    return this.all(sql, args)[0];
  }

  close(): void {
    void this.worker.terminate();
  }
}
