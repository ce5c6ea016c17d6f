// WAL checkpoints off the server's thread (embedded file). SQLite checkpoints in the connection whose
// commit left the WAL past 1,000 frames, inside that COMMIT: here the server's own thread, so the
// request whose commit crossed the line waited for the copy of every frame into the database file
// and its fsync (a bulk delete of 100,000 sessions writes about 40 MB of WAL: some 50 ms more). With
// the checkpointer up, the writer connections run with wal_autocheckpoint=0 and a worker thread with
// its own connection runs the same PASSIVE checkpoint once a commit has left that many frames not yet
// copied; the writer then copies what came in meanwhile (see finish). If the worker cannot start or
// dies, the writers checkpoint for themselves again.
import { closeSync, openSync, readSync } from "node:fs";
import { endianness } from "node:os";
import { Worker } from "node:worker_threads";
import { log } from "../log.ts";

/** SQLite's own autocheckpoint threshold, in WAL frames (pages). */
export const CHECKPOINT_FRAMES = 1000;

/** Where the WAL-index header (in the -shm file, native byte order) keeps its counters: https://www.sqlite.org/walformat.html */
const MX_FRAME = 16; // frames in the WAL
const N_BACKFILL = 96; // of them, frames already copied into the database file

export interface CheckpointerOptions {
  /** Turns the writers' own checkpoints off (true) or back on (false). */
  setAutocheckpoint(on: boolean): Promise<void>;
  /**
   * A PASSIVE checkpoint on the writer connection, between two writes: it copies only the frames
   * committed while the worker copied the rest, and leaves the WAL wholly copied, so the writer's
   * next write starts it over. (A WAL starts over only at a write that begins while it is wholly
   * copied; under steady writes the worker alone never sees that, and the WAL grew without end.)
   */
  finish(): Promise<void>;
  threshold?: number;
}

export class Checkpointer {
  private readonly worker: Worker;
  private ready = false;
  private running = false;
  private closed = false;
  private shm: number | undefined;
  private readonly header = new DataView(new ArrayBuffer(N_BACKFILL + 4));
  private readonly littleEndian = endianness() === "LE";
  private readonly threshold: number;
  /** Settles when the worker has exited (closed, failed to start, or died). */
  private readonly exited: Promise<void>;

  constructor(
    private readonly path: string,
    private readonly opts: CheckpointerOptions,
  ) {
    this.threshold = opts.threshold ?? CHECKPOINT_FRAMES;
    this.worker = new Worker(new URL("./checkpointer-worker.mjs", import.meta.url), { workerData: { path } });
    this.worker.unref();
    this.worker.on("message", (msg: { ready?: true; closed?: true; ok?: boolean; error?: string }) => {
      if (msg.ready) return void this.started();
      if (msg.closed) return void this.worker.terminate();
      if (msg.ok === false) {
        this.running = false;
        log("warn", "background WAL checkpoint failed", { error: msg.error });
        return;
      }
      this.opts
        .finish()
        .catch((err: unknown) => log("warn", "WAL checkpoint on the writer failed", { error: (err as Error).message }))
        .finally(() => {
          this.running = false;
          this.poke(); // commits that came meanwhile may have crossed the line again
        });
    });
    this.exited = new Promise((resolve) => {
      this.worker.once("error", (err) => {
        log("warn", "WAL checkpointer stopped; the writers checkpoint for themselves", { error: err.message });
      });
      this.worker.once("exit", () => {
        this.fallBack();
        resolve();
      });
    });
  }

  /** Background checkpoints are on (the writers' own are off). */
  get active(): boolean {
    return this.ready && !this.closed;
  }

  /** After a commit: asks for a checkpoint when that many frames wait to be copied (a 100-byte read). */
  poke(): void {
    if (!this.active || this.running) return;
    const pending = this.pendingFrames();
    if (pending === undefined || pending < this.threshold) return;
    this.running = true;
    this.worker.postMessage("checkpoint");
  }

  /** Frames in the WAL not yet copied into the database file. */
  pendingFrames(): number | undefined {
    const wal = this.walFrames();
    return wal && wal.frames - Math.min(wal.frames, wal.copied);
  }

  /** Frames in the WAL since it last started over, and how many of them are copied, from the WAL-index header. */
  walFrames(): { frames: number; copied: number } | undefined {
    try {
      this.shm ??= openSync(`${this.path}-shm`, "r");
      if (readSync(this.shm, this.header, 0, this.header.byteLength, 0) < this.header.byteLength) return undefined;
    } catch {
      return undefined; // no -shm yet (nothing written in WAL mode): nothing to copy
    }
    return { frames: this.header.getUint32(MX_FRAME, this.littleEndian), copied: this.header.getUint32(N_BACKFILL, this.littleEndian) };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.worker.postMessage("close");
    // A checkpoint under way finishes first; one that hangs does not hold up the shutdown.
    const timer = setTimeout(() => void this.worker.terminate(), 5_000);
    await this.exited;
    clearTimeout(timer);
    if (this.shm !== undefined) closeSync(this.shm);
  }

  private started(): void {
    if (this.closed) return;
    this.opts
      .setAutocheckpoint(false)
      .then(() => {
        this.ready = true;
        this.poke();
      })
      .catch((err: unknown) => {
        if (!this.closed) log("warn", "could not hand WAL checkpoints to the worker", { error: (err as Error).message });
      });
  }

  /** The worker is gone: the writers take their checkpoints back (unless the storage is closing). */
  private fallBack(): void {
    const wasReady = this.ready;
    this.ready = false;
    if (wasReady && !this.closed) this.opts.setAutocheckpoint(true).catch(() => undefined);
  }
}
