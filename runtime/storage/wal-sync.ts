// Durable commits without the fsync on the server's thread (embedded file, db_synchronous "full").
// The native driver is synchronous: with PRAGMA synchronous=FULL every COMMIT blocked the event loop
// for its fsync (0.1 ms on an idle SSD, 2 ms and more under other I/O), and no request, probe or
// plugin call was served meanwhile. The writer connections now commit with synchronous=NORMAL (the
// WAL frames are written, not synced: SQLite keeps the database consistent either way) and a write
// is acknowledged only once an fdatasync of the WAL file, run on the runtime's I/O threads, has
// finished after its commit. Commits made while one sync runs share the next one.
// What changes against FULL: a reader (of this process or another) may see a commit up to one sync
// before it is on disk; no write is acknowledged before it is.
// The WAL is the file SQLite itself names (a symlinked or %-encoded path is not it), held open for
// the storage's life: a write-back error is reported to a descriptor open when it happened, not to
// one opened later. A sync that failed leaves frames that may never reach the disk (and recovery
// stops at the first missing frame): every later write fails too, and /readyz says so, until a restart.
import { open, type FileHandle } from "node:fs/promises";

export class WalSync {
  /** The sync running now, if any. */
  private running: Promise<void> | undefined;
  /** The sync that starts once `running` is over (covers every commit made while it runs). */
  private next: Promise<void> | undefined;
  /** Why writes can no longer be made durable (a sync failed), once one did. */
  fault: Error | undefined;
  /** Syncs finished so far. */
  syncs = 0;

  /** `sync` flushes the WAL file to disk. */
  constructor(private readonly sync: () => Promise<void>, private readonly release: () => Promise<void> = async () => {}) {}

  /** The WAL of the database whose main file SQLite names `file` (pragma database_list). */
  static forDatabase(file: string): WalSync {
    let handle: Promise<FileHandle> | undefined;
    return new WalSync(
      async () => (await (handle ??= open(`${file}-wal`, "r"))).datasync(),
      async () => void (await handle?.then((h) => h.close(), () => undefined)),
    );
  }

  /** Resolves once every commit made before this call is on disk; rejects when that sync failed. */
  durable(): Promise<void> {
    if (this.fault) return Promise.reject(this.fault);
    // A sync that has not started yet covers this commit; one that is running may have started before it.
    if (this.next) return this.next;
    if (!this.running) return this.start();
    const after = () => {
      this.next = undefined;
      return this.fault ? Promise.reject(this.fault) : this.start();
    };
    return (this.next = this.running.then(after, after));
  }

  /** Waits for the syncs under way, then lets the WAL file go. */
  async close(): Promise<void> {
    await Promise.allSettled([this.running, this.next]);
    await this.release();
  }

  private start(): Promise<void> {
    const run: Promise<void> = this.sync().then(
      () => {
        this.syncs++;
        if (this.running === run) this.running = undefined;
      },
      (err: unknown) => {
        if (this.running === run) this.running = undefined;
        this.fault ??= new Error(`committed, but the database's WAL could not be synced to disk (${(err as Error).message}); no write is durable until hookbox restarts`);
        throw this.fault;
      },
    );
    this.running = run;
    return run;
  }
}
