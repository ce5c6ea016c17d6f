// Group commit for storage.batch: batches that arrive in the same turn of the event loop (concurrent
// turns' appends, a fan-out's KV commit) run as ONE write transaction, so they share one fsync. On
// the embedded file with synchronous=FULL that fsync is most of a commit, and it blocks the thread
// (the native driver is synchronous): one per batch capped a busy server's turns per second. Every
// caller still gets its own results, and a batch is acknowledged only once its transaction has
// committed (and, given `durable`, is on disk: wal-sync.ts). When the shared transaction fails (one
// batch's guard or constraint), nothing of it was written and each batch runs again alone, in order:
// only the failing one fails. A wait for the disk that fails comes after a commit: nothing runs again.
import type { ResultSet } from "@libsql/client";
import type { BatchItem } from "./file-batch.ts";
import { setImmediate } from "node:timers";

interface Pending {
  stmts: BatchItem[];
  resolve: (results: ResultSet[]) => void;
  reject: (err: unknown) => void;
}

export class GroupCommit {
  private queue: Pending[] = [];

  /**
   * `commit` runs statements as one write transaction (all commit, or none); `durable`, when given,
   * resolves once what was committed before it was called is on disk (no batch is answered before).
   */
  constructor(
    private readonly commit: (stmts: BatchItem[]) => Promise<ResultSet[]>,
    private readonly durable?: () => Promise<void>,
  ) {}

  batch(stmts: BatchItem[]): Promise<ResultSet[]> {
    return new Promise((resolve, reject) => {
      // The first batch of a turn schedules the commit; the turn's later batches join it.
      if (this.queue.push({ stmts, resolve, reject }) === 1) setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    const group = this.queue;
    this.queue = [];
    if (group.length === 1) return settle(group[0]!, this.committed(group[0]!.stmts));
    let results: ResultSet[];
    try {
      results = await this.commit(group.flatMap((p) => p.stmts));
    } catch {
      for (const p of group) await settle(p, this.committed(p.stmts));
      return;
    }
    try {
      await this.durable?.();
    } catch (err) {
      for (const p of group) p.reject(err);
      return;
    }
    let at = 0;
    for (const p of group) p.resolve(results.slice(at, (at += p.stmts.length)));
  }

  /** One batch's transaction, then its wait for the disk. */
  private async committed(stmts: BatchItem[]): Promise<ResultSet[]> {
    const results = await this.commit(stmts);
    await this.durable?.();
    return results;
  }
}

function settle(p: Pending, running: Promise<ResultSet[]>): Promise<void> {
  return running.then(p.resolve, p.reject);
}
