// Group commit for storage.batch: batches that arrive in the same turn of the event loop (concurrent
// turns' appends, a fan-out's KV commit) run as ONE write transaction, so they share one fsync. On
// the embedded file with synchronous=FULL that fsync is most of a commit, and it blocks the thread
// (the native driver is synchronous): one per batch capped a busy server's turns per second. Every
// caller still gets its own results, and a batch is acknowledged only once its transaction has
// committed. When the shared transaction fails (one batch's guard or constraint), nothing of it was
// written and each batch runs again alone, in order: only the failing one fails.
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

  /** `commit` runs statements as one write transaction (all commit, or none). */
  constructor(private readonly commit: (stmts: BatchItem[]) => Promise<ResultSet[]>) {}

  batch(stmts: BatchItem[]): Promise<ResultSet[]> {
    return new Promise((resolve, reject) => {
      // The first batch of a turn schedules the commit; the turn's later batches join it.
      if (this.queue.push({ stmts, resolve, reject }) === 1) setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    const group = this.queue;
    this.queue = [];
    if (group.length === 1) return settle(group[0]!, this.commit(group[0]!.stmts));
    let results: ResultSet[];
    try {
      results = await this.commit(group.flatMap((p) => p.stmts));
    } catch {
      for (const p of group) await settle(p, this.commit(p.stmts));
      return;
    }
    let at = 0;
    for (const p of group) p.resolve(results.slice(at, (at += p.stmts.length)));
  }
}

function settle(p: Pending, running: Promise<ResultSet[]>): Promise<void> {
  return running.then(p.resolve, p.reject);
}
