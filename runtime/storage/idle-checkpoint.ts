// WAL checkpoints off the commit path. SQLite checkpoints inside the COMMIT that takes the WAL past
// its autocheckpoint size (1,000 pages by default), so one request paid for copying every earlier
// request's pages into the database: about 50 ms of a 100,000-session delete's 150 ms commit, 20
// ms of a bulk delete's clean-up commit. Here a PASSIVE checkpoint runs once writes have paused for
// IDLE_MS, or MAX_DELAY_MS after the first write it waits for when they never pause; the writer
// connections' own autocheckpoint is only a backstop. It still runs on this thread (the driver is
// synchronous) and copies the same pages, but between requests instead of inside one.
import { log } from "../log.ts";

/** WAL pages past which a commit checkpoints anyway (256 MiB at 16 KiB pages): a backstop only. */
export const AUTOCHECKPOINT_PAGES = 16_384;
/** Writes must pause this long before the WAL is checkpointed... */
export const IDLE_MS = 100;
/** ...or the first write since the last checkpoint be this old. */
export const MAX_DELAY_MS = 1_000;

export class IdleCheckpoint {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private lastWrite = 0;
  /** The first write since the last checkpoint. */
  private firstWrite: number | undefined;
  private closed = false;

  /** `checkpoint` runs PRAGMA wal_checkpoint(PASSIVE) on a connection that is not in a transaction. */
  constructor(private readonly checkpoint: () => void) {}

  /** A write committed (or failed): the checkpoint waits until writes have paused. */
  wrote(): void {
    if (this.closed) return; // a write that was still under way at close
    this.lastWrite = performance.now();
    this.firstWrite ??= this.lastWrite;
    if (this.timer === undefined) this.arm(IDLE_MS);
  }

  /** Runs the checkpoint now (what is due, or not). */
  now(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.run();
  }

  /**
   * Before the connection closes: the checkpoint still due runs now. A short-lived process (the
   * CLI) never reaches the backstop, and another process on the file (a server) checkpoints only
   * after its own writes: the WAL this one wrote would otherwise stay until then.
   */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.firstWrite !== undefined) this.run();
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.fire(), ms);
    (this.timer as { unref?: () => void }).unref?.();
  }

  private fire(): void {
    this.timer = undefined;
    const now = performance.now();
    const quiet = now - this.lastWrite;
    const waited = now - (this.firstWrite ?? now);
    if (quiet < IDLE_MS && waited < MAX_DELAY_MS) return this.arm(Math.min(IDLE_MS - quiet, MAX_DELAY_MS - waited));
    this.run();
  }

  private run(): void {
    this.firstWrite = undefined;
    try {
      this.checkpoint();
    } catch (err) {
      // Another process holding the database busy: its checkpoints or our next one copy the pages.
      log("warn", "WAL checkpoint failed; the next pause in writes tries again", { error: (err as Error).message });
    }
  }
}
