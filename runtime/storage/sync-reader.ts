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
  /** This process committed a write: the next read must see it (ends a shared snapshot, if any). */
  release(): void;
  close(): void;
}

export function openSyncReader(url: string, authToken?: string): SyncReader {
  return url.startsWith("file:") ? new FileReader(url.slice("file:".length)) : new RemoteReader(url, authToken);
}

/**
 * Read-less rounds of the microtask queue a shared snapshot waits through before it ends: a fan-out's
 * next plugin reads a few promise hops after the last one (its call's result travels up through the
 * dispatcher's awaits), and each round a check makes lets one hop run.
 */
const QUIET_ROUNDS = 16;
/** Checks are queued as reactions to a settled promise: Node's queueMicrotask wraps each callback in an AsyncResource (~0.5 us), a reaction costs a promise. */
const settled = Promise.resolve();

/**
 * Reads made in one run of the microtask queue share one read transaction. On a WAL file an
 * autocommit read takes and drops the read lock each time (two fcntl calls and an fstat): ~6 of a
 * point read's 8.5 us, against ~2.5 us inside a transaction; a 10-plugin fan-out whose plugins each
 * read a key spent half its time there. The first read runs alone (BEGIN and COMMIT would cost a
 * lone read more), the second opens the transaction. It ends before the microtask queue is empty,
 * i.e. before the event loop runs any other task (an I/O callback, a timer, an immediate), on Node
 * and on Deno alike; and when this process commits a write (release). So a read sees every commit
 * this process made before it and every commit another process made before the current task began:
 * news of a commit elsewhere (a socket, a request) can only arrive in a later task. (A snapshot that
 * lasted until setImmediate was tried and reverted: on Node, opened in the timers or check phase, it
 * stayed open across the next poll for I/O.)
 */
type Burst = "idle" | "one read" | "snapshot";

export class FileReader implements SyncReader {
  reads = 0;
  private readonly db: NativeDatabase;
  private readonly statements: StatementCache;
  private readonly objectStatements: StatementCache;
  private burst: Burst = "idle";
  /** A check is queued; reads since the last check; checks in a row that found none. */
  private checking = false;
  private readsSinceCheck = 0;
  private quietRounds = 0;
  private readonly check = () => {
    if (this.burst !== "idle") {
      if (this.readsSinceCheck > 0) this.quietRounds = 0;
      else if (++this.quietRounds >= QUIET_ROUNDS) this.release();
    }
    this.readsSinceCheck = 0;
    if (this.burst === "idle") this.checking = false;
    else void settled.then(this.check);
  };

  constructor(path: string) {
    this.db = openNative(path);
    this.db.exec("PRAGMA query_only = 1");
    this.statements = new StatementCache(this.db, true);
    this.objectStatements = new StatementCache(this.db, false);
  }

  private enter(): void {
    this.reads++;
    this.readsSinceCheck++;
    if (this.burst === "snapshot") return;
    if (this.burst === "idle") {
      this.burst = "one read";
      this.quietRounds = 0;
      if (!this.checking) {
        this.checking = true;
        void settled.then(this.check);
      }
      return;
    }
    if (!this.db.inTransaction) this.db.exec("BEGIN");
    this.burst = "snapshot";
  }

  release(): void {
    if (this.burst === "snapshot" && this.db.inTransaction) {
      try {
        this.db.exec("COMMIT");
      } catch {
        // A read-only transaction has nothing to lose; one still open would pin an old snapshot.
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
      }
    }
    this.burst = "idle";
  }

  all(sql: string, args: readonly SqlArg[]): unknown[][] {
    this.enter();
    return this.statements.get(sql).all(args) as unknown[][];
  }

  // The native get() skips all()'s row iterator: ~8 us a point read against ~13.
  one(sql: string, args: readonly SqlArg[]): unknown[] | undefined {
    this.enter();
    return this.statements.get(sql).get(args) as unknown[] | undefined;
  }

  /** Rows as objects keyed by column name. */
  objects(sql: string, args: readonly SqlArg[]): Array<Record<string, unknown>> {
    this.enter();
    return this.objectStatements.get(sql).all(args) as Array<Record<string, unknown>>;
  }

  close(): void {
    this.release();
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
    // The read given up on has been answered since: the server is back, no need to wait out DOWN_MS.
    if (now < this.downUntil && Atomics.load(this.ctl, 2) === this.lastId) this.downUntil = 0;
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

  /** Every read is its own round trip: there is no snapshot to end. */
  release(): void {}

  close(): void {
    void this.worker.terminate();
  }
}
