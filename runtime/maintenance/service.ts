// Operator maintenance: the delete sweeps, silent idle auto-archive, and gateway hygiene (compacts
// every open session that is over its context budget, reason gateway_hygiene).
import type { CompactionEngine, CompactOutcome } from "../compaction/engine.ts";
import type { CoreContext } from "../context.ts";
import type { DeletionService, RemoveResult } from "../deletion/service.ts";
import type { SessionService } from "../sessions/service.ts";
import { runSweep, type SweepName, type SweepParams } from "./sweeps.ts";

export class MaintenanceService {
  constructor(
    private readonly ctx: CoreContext,
    private readonly sessions: SessionService,
    private readonly deletion: DeletionService,
    private readonly compaction: CompactionEngine,
  ) {}

  /** `dryRun`: the same selection and cascade in a transaction that is rolled back; no hook fires. */
  sweep(name: SweepName, params: SweepParams = {}, opts: { dryRun?: boolean } = {}): Promise<RemoveResult> {
    return runSweep(this.deletion, this.ctx.config, name, params, opts.dryRun === true);
  }

  idleArchive(days?: number, opts: { dryRun?: boolean } = {}): Promise<string[]> {
    return this.sessions.idleArchive(days, opts.dryRun === true);
  }

  async hygiene(): Promise<CompactOutcome[]> {
    const budget = this.ctx.config.compaction.context_budget_tokens;
    const over = await this.ctx.storage.db
      .selectFrom("sessions")
      .select("id")
      .where("ended_at", "is", null)
      .where("token_estimate", ">", budget)
      .orderBy("id")
      .execute();
    const done: CompactOutcome[] = [];
    for (const { id } of over) {
      const out = await this.compaction.compact({ session_id: id, kind: "summarize", reason: "gateway_hygiene" }).catch(() => null);
      if (out?.compacted) done.push(out);
    }
    return done;
  }
}
