// Maintenance sweeps. Each one only CHOOSES sessions (inside the delete transaction); the removal
// itself is the deletion service's single code path, so cascade and on_session_delete behave the
// same as for a user's delete.
import { sql } from "kysely";
import { countedDelete } from "../storage/kv-usage.ts";
import type { Config } from "../config.ts";
import type { DeletionService, RemoveResult, Trx } from "../deletion/service.ts";

export const SWEEP_NAMES = ["empty_sweep", "prune", "ghost_prune", "profile_repair"] as const;
export type SweepName = (typeof SWEEP_NAMES)[number];

export interface SweepParams {
  /** empty_sweep: only sessions older than this are empty "for real" (default 3600 s). */
  grace_seconds?: number | undefined;
  /** prune: overrides retention.prune_after_days. */
  older_than_days?: number | undefined;
}

const ids = async (q: Promise<{ rows: Array<{ id: string }> }>) => (await q).rows.map((r) => r.id);

const selectors: Record<SweepName, (trx: Trx, now: number, p: SweepParams, c: Config) => Promise<string[]>> = {
  // No messages, unused for the grace period (a slash command counts as use: it touches updated_at),
  // and no child sessions (which would cascade).
  empty_sweep: (trx, now, p) =>
    ids(sql<{ id: string }>`select s.id from sessions s
      where s.updated_at <= ${now - (p.grace_seconds ?? 3600) * 1000}
        and not exists (select 1 from messages m where m.session_id = s.id)
        and not exists (select 1 from sessions c where c.parent_session_id = s.id)
      order by s.created_at, s.id`.execute(trx)),
  // Not updated for the retention period, and nothing its delete would cascade to was either: the
  // cascade takes children and the whole compaction chain, so an old predecessor took its live
  // successor with it (a conversation rotated once was pruned while in daily use). Kept: the
  // sessions a recent one is reachable from (its parent, its chain both ways, and theirs).
  prune: (trx, now, p, c) => {
    const cutoff = now - (p.older_than_days ?? c.retention.prune_after_days) * 86_400_000;
    // Seeded by the recent sessions that are linked at all (a parent, a predecessor, a successor),
    // each found through its link's partial index: a recent session alone keeps nobody, and seeding
    // with every recent one cost 4-5x the old selector at 100,000 mostly recent sessions.
    return ids(sql<{ id: string }>`with recursive kept(id) as (
        select id from sessions where parent_session_id is not null and updated_at >= ${cutoff}
        union select id from sessions where compacted_from is not null and updated_at >= ${cutoff}
        union select r.id from sessions s join sessions r on r.id = s.compacted_from where s.compacted_from is not null and r.updated_at >= ${cutoff}
        union select s.parent_session_id from kept k join sessions s on s.id = k.id where s.parent_session_id is not null
        union select s.compacted_from from kept k join sessions s on s.id = k.id where s.compacted_from is not null
        union select s.id from kept k join sessions s on s.compacted_from = k.id)
      select id from sessions
      where updated_at < ${cutoff} and id not in (select id from kept)
      order by created_at, id`.execute(trx));
  },
  // Rows pointing at a parent or chain predecessor that no longer exists; orphaned messages and
  // session KV rows (no session at all) are dropped in the same transaction.
  ghost_prune: async (trx) => {
    await sql`delete from messages where session_id not in (select id from sessions)`.execute(trx);
    for (const stmt of countedDelete(`from plugin_kv k where k.session_id <> '' and k.session_id not in (select id from sessions)`)) await sql.raw(stmt).execute(trx);
    return ids(sql<{ id: string }>`select s.id from sessions s
      where (s.parent_session_id is not null and not exists (select 1 from sessions p where p.id = s.parent_session_id))
         or (s.compacted_from is not null and not exists (select 1 from sessions p where p.id = s.compacted_from))
      order by s.created_at, s.id`.execute(trx));
  },
  // Profile invariant: every session has a non-blank profile, and a child is in its parent's.
  profile_repair: (trx) =>
    ids(sql<{ id: string }>`select s.id from sessions s left join sessions p on p.id = s.parent_session_id
      where trim(s.profile) = '' or (p.id is not null and p.profile <> s.profile)
      order by s.created_at, s.id`.execute(trx)),
};

export function runSweep(deletion: DeletionService, config: Config, name: SweepName, params: SweepParams = {}, dryRun = false): Promise<RemoveResult> {
  return deletion.remove({ reason: name, select: (trx, now) => selectors[name](trx, now, params, config), dryRun });
}
