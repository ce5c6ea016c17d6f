// Durable commits without the fsync on the server's thread (embedded file, db_synchronous "full").
// The native driver is synchronous: with PRAGMA synchronous=FULL every COMMIT blocked the event loop
// for its fsync (0.1 ms on an idle SSD, 2 ms and more under other I/O), and no request, probe or
// plugin call was served meanwhile. The writer connections now commit with synchronous=NORMAL (the
// WAL frames are written, not synced: SQLite keeps the database consistent either way) and a write
// is acknowledged only once an fdatasync of the WAL file, run on the runtime's I/O threads, has
// finished after its commit. Commits made while one sync runs share the next one.
// What changes against FULL: a reader (of this process or another) may see a commit up to one sync
// before it is on disk; no write is acknowledged before it is.
import { open } from "node:fs/promises";

export class WalSync {
  /** The sync running now, if any. */
  private running: Promise<void> | undefined;
  /** The sync that starts once `running` is over (covers every commit made while it runs). */
  private next: Promise<void> | undefined;
  /** Syncs finished so far. */
  syncs = 0;

  /** `sync` flushes the WAL file to disk (the default: fdatasync of `<db>-wal`). */
  constructor(private readonly sync: () => Promise<void>) {}

  static forDatabase(path: string): WalSync {
    return new WalSync(() => datasync(`${path}-wal`));
  }

  /** Resolves once every commit made before this call is on disk; rejects when that sync failed. */
  durable(): Promise<void> {
    // A sync that has not started yet covers this commit; one that is running may have started before it.
    if (this.next) return this.next;
    if (!this.running) return this.start();
    const after = () => {
      this.next = undefined;
      return this.start();
    };
    return (this.next = this.running.then(after, after));
  }

  private start(): Promise<void> {
    const run: Promise<void> = this.sync().then(
      () => {
        this.syncs++;
        if (this.running === run) this.running = undefined;
      },
      (err: unknown) => {
        if (this.running === run) this.running = undefined;
        throw new Error(`committed, but the database's WAL could not be synced to disk: ${(err as Error).message}`);
      },
    );
    this.running = run;
    return run;
  }
}

/**
 * fdatasync of the WAL at `path` (opened for it: the WAL stays one file while a connection is open).
 * No WAL means the last connection closed, which checkpoints it into the database, synced, first.
 */
async function datasync(path: string): Promise<void> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return;
    throw err;
  }
  try {
    await handle.datasync();
  } finally {
    await handle.close();
  }
}
