// The one code path that removes (or archives) sessions. Every entry point — HTTP delete and bulk
// delete, CLI, `/exit --delete`, the sweeps and archive — calls `remove`, which:
//   1. picks the seed ids (given, or selected inside the transaction so the choice is consistent),
//   2. expands them to the cascade closure (child sessions and the compaction chain both ways),
//      one set-based statement per level of the cascade,
//   3. deletes messages and sessions set-based and tombstones the ids, in ONE transaction (on a
//      libSQL server, one per 10,000 seeds: SERVER_PART_SEEDS); when no plugin subscribes to
//      on_session_delete, their plugin KV goes in it too (nobody reads it after),
//   4. after commit, emits on_session_delete once per profile touched, each event with the ids
//      actually removed in that profile (profile names are sorted; seeds first within each); the
//      plugins can still read the deleted sessions' KV,
//   5. then purges that KV (set-based, one round trip; a sweep does it if this process dies first).
// Ids that are already gone are simply not in the result, so a retry or an overlapping bulk delete
// fires nothing for them. Archive uses the same path but flips the flag instead of deleting.
import { resolve } from "node:path";
import { sql, type Transaction } from "kysely";
import type { Database } from "../storage/schema.ts";
import type { DeleteReason } from "../../hooks/catalogue.ts";
import type { CoreContext } from "../context.ts";
import { log } from "../log.ts";

export type Trx = Transaction<Database>;

export interface RemoveRequest {
  reason: DeleteReason;
  /** Seed ids; use `select` instead to choose them inside the transaction (sweeps). */
  ids?: readonly string[];
  select?: (trx: Trx, now: number) => Promise<string[]>;
  /** Do everything inside the transaction, then roll it back: the result says what WOULD go; no hook fires. */
  dryRun?: boolean;
}

export interface RemoveResult {
  reason: DeleteReason;
  /** The seed this operation was about (first seed that was removed), "" when nothing was. */
  session_id: string;
  /** Every row removed (or, for archive, flipped), cascade included, sorted. */
  deleted_ids: string[];
  /** The profiles the removed sessions were in, sorted: one on_session_delete fired for each. */
  profiles: string[];
  fired: boolean;
  /** Set when the request was a dry run (nothing changed). */
  dry_run?: true;
}

/** Thrown inside a dry run's transaction to roll it back while carrying the result out. */
class DryRun {
  constructor(readonly value: Part) {}
}

/** What an operation removed (or flipped): id -> profile. */
type Removed = Map<string, string>;

/** One transaction's seeds, what it removed, and the seeds chosen for later transactions. */
interface Part {
  seeds: string[];
  rows: Removed;
  rest?: string[];
}

export class DeletionService {
  constructor(private readonly ctx: CoreContext) {}

  async remove(req: RemoveRequest): Promise<RemoveResult> {
    const now = this.ctx.now();
    const { kv } = this.ctx;
    // Checked before the transaction: a plugin subscribing meanwhile finds the KV gone, as it would
    // a moment later.
    const kvReadAfter = this.ctx.dispatcher.subscribersOf("on_session_delete").length > 0;
    // One transaction removing at most `most` seeds and their cascade. Given ids are taken in turn
    // (`rest`: those left); a sweep's are chosen again in each, none `tried` before: a session
    // that stopped matching meanwhile (a new message) stays, as in one transaction.
    const removing = (tried: ReadonlySet<string>, rest: readonly string[] | undefined, most: number) => async (trx: Trx): Promise<Part> => {
      const chosen = req.select ? (await req.select(trx, now)).filter((id) => !tried.has(id)) : (rest ?? [...new Set(req.ids ?? [])]);
      const seeds = chosen.slice(0, most);
      const seedJson = JSON.stringify(seeds);
      const purge = kvReadAfter ? undefined : (idsJson: string) => kv.purgeSessionsIn(trx, idsJson);
      const rows: Removed =
        seeds.length === 0 ? new Map() : req.reason === "archive" ? await archiveIn(trx, seedJson, now) : await deleteClosureIn(trx, seedJson, now, purge);
      if (req.dryRun) throw new DryRun({ seeds, rows });
      return { seeds, rows, rest: chosen.slice(seeds.length) };
    };
    const { seeds, rows, failure }: Part & { failure?: unknown } =
      this.ctx.storage.url.startsWith("file:") || req.dryRun
        ? await this.ctx.storage
            .write(removing(new Set(), undefined, Infinity))
            .catch((err: unknown) => {
              if (err instanceof DryRun) return err.value;
              throw err;
            })
        : await inParts((tried, rest) => this.ctx.storage.write(removing(tried, rest, SERVER_PART_SEEDS)));
    // Sorted once, as plain strings (a comparator over row objects cost ~3x at 100,000 ids); each
    // profile's list keeps that order.
    const deleted_ids = [...rows.keys()].sort();
    const byProfile = groupByProfile(deleted_ids, rows);
    const result: RemoveResult = {
      reason: req.reason,
      session_id: firstSeed(seeds, (id) => rows.has(id)) ?? deleted_ids[0] ?? "",
      deleted_ids,
      profiles: [...byProfile.keys()],
      fired: rows.size > 0 && !req.dryRun,
    };
    if (req.dryRun) return { ...result, dry_run: true };
    const sessions_dir = resolve(this.ctx.config.sessions_dir);
    for (const [profile, ids] of byProfile) {
      await this.ctx.dispatcher.emit("on_session_delete", {
        // The event's session: a seed removed in this profile, else (cascade only) its first row.
        session_id: firstSeed(seeds, (id) => rows.has(id) && realProfile(rows.get(id)!) === profile) ?? ids[0]!,
        reason: req.reason,
        profile,
        deleted_ids: ids,
        sessions_dir,
      });
    }
    if (req.reason !== "archive" && result.fired) {
      // The delete is committed and announced: a purge that fails (the database went away) must not
      // turn it into an error; the sweep purges what is left (the tombstones say what).
      if (kvReadAfter) {
        await kv.purgeSessions(result.deleted_ids).catch((err: unknown) => {
          log("warn", "after-delete KV purge failed; the sweep will finish it", { ids: result.deleted_ids.length, error: (err as Error).message });
        });
      } else kv.forgetUsage();
    }
    // A part failed after others committed: those were announced and purged above; the caller
    // hears of the failure (a retry removes the rest).
    if (failure !== undefined) throw failure;
    return result;
  }
}

/**
 * Seeds per transaction on a libSQL server. The server ends a transaction that holds its write lock
 * for more than 5 s while another writer waits, and refuses a text over ~5 MB: a delete of 70,000
 * sessions under load failed every time (stalling every node's writes meanwhile), one of 80,000
 * failed on its closure's size (an outside multi-node probe). 10,000 take about a second there.
 */
const SERVER_PART_SEEDS = 10_000;

/**
 * Runs `part` (one transaction removing at most SERVER_PART_SEEDS seeds and their cascade, none of
 * `tried`; `rest`: what the last one left of its choice) until a part leaves none. Each part is
 * whole; an error ends the loop and is returned with what the parts before it removed.
 */
async function inParts(part: (tried: ReadonlySet<string>, rest: readonly string[] | undefined) => Promise<Part>): Promise<Part & { failure?: unknown }> {
  const tried = new Set<string>();
  const seeds: string[] = [];
  const rows: Removed = new Map();
  let rest: readonly string[] | undefined;
  try {
    do {
      const done = await part(tried, rest);
      for (const id of done.seeds) tried.add(id);
      seeds.push(...done.seeds);
      for (const [id, profile] of done.rows) rows.set(id, profile);
      rest = done.rest ?? [];
    } while (rest.length > 0);
  } catch (failure) {
    if (rows.size === 0) throw failure;
    return { seeds, rows, failure };
  }
  return { seeds, rows };
}

/** A row's profile as plugins see it: a blank one (legacy rows profile_repair removes) is the root's. */
const realProfile = (p: string) => (p.trim() === "" ? "default" : p);

/** The removed ids per profile, each list in the order of `ids` (sorted), profiles in name order. */
function groupByProfile(ids: string[], rows: Removed): Map<string, string[]> {
  // Most deletes stay in one profile: one pass over the map in its own order answers that, where a
  // lookup per sorted id cost 30-60 ms at 100,000 ids (each a cache miss).
  const first = rows.values().next().value;
  if (first !== undefined && allEqual(rows.values(), first)) return new Map([[realProfile(first), ids]]);
  const groups = new Map<string, string[]>();
  for (const id of ids) {
    const p = realProfile(rows.get(id)!);
    (groups.get(p) ?? groups.set(p, []).get(p)!).push(id);
  }
  return new Map([...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

function allEqual(values: Iterable<string>, first: string): boolean {
  for (const v of values) if (v !== first) return false;
  return true;
}

const firstSeed = (seeds: readonly string[], removed: (id: string) => boolean) => seeds.find(removed);

/** Deletes the seeds and everything that cascades from them (and their KV with `purge`); returns what was removed. */
async function deleteClosureIn(trx: Trx, seedJson: string, now: number, purge?: (idsJson: string) => Promise<void>): Promise<Removed> {
  const { rows, rowids } = await closureIn(trx, seedJson);
  if (rows.size === 0) return rows;
  const idsJson = JSON.stringify([...rows.keys()]);
  await sql`delete from messages where session_id in (select value from json_each(${idsJson}))`.execute(trx);
  // Their plugin KV stays readable until on_session_delete has run; the tombstone marks it for purge
  // and keeps out a late write (a plugin call that began before the delete and commits after it),
  // which may come for a session that had no KV at all: every deleted session gets one.
  await sql`insert into session_tombstones (id, deleted_at) select value, ${now} from json_each(${idsJson}) where true
    on conflict (id) do update set deleted_at = excluded.deleted_at`.execute(trx);
  // By the rowids the closure read in this transaction: no second lookup of each id in the key index
  // (about 10% of the sessions delete at 100,000 sessions).
  await sql`delete from sessions where rowid in (select value from json_each(${JSON.stringify(rowids)}))`.execute(trx);
  await purge?.(idsJson);
  return rows;
}

/**
 * The cascade closure of the seeds: child sessions and the compaction chain both ways, expanded one
 * level at a time, each level one set-based statement over the previous level's ids (index lookups
 * only). A recursive CTE does the same but dedupes every row through a temporary b-tree and was
 * about a third slower at 100,000 sessions; reading every session's links in one scan and walking
 * them in JS was no faster at 25,000 seed trees of 100,000 sessions (the JS maps cost what the
 * lookups save).
 * Each level comes back as ONE JSON string (json_group_array), not one row per session: turning
 * 100,000 rows into JS objects cost more than the index lookups themselves (about 2x the whole
 * closure). Rows carry compacted_from, so the chain's backward step looks up only predecessors not
 * found yet instead of re-reading every frontier row. CROSS JOIN walks each id list once with one
 * index seek per id; `IN (select ... json_each)` first copied the list into a temporary index (about
 * a fifth of the closure at 100,000 sessions). A row found twice (two sessions continue the same
 * predecessor) is skipped as already found.
 */
async function closureIn(trx: Trx, seedJson: string): Promise<{ rows: Removed; rowids: number[] }> {
  const found: Removed = new Map();
  const rowids: number[] = [];
  let level = await closureLevel(trx, "[]", seedJson);
  while (level.length > 0) {
    const frontier: string[] = [];
    const predecessors: string[] = [];
    for (const [id, profile, from, rowid] of level) {
      if (found.has(id)) continue;
      found.set(id, profile);
      rowids.push(rowid);
      frontier.push(id);
      if (from !== null && !found.has(from)) predecessors.push(from);
    }
    if (frontier.length === 0) break;
    level = await closureLevel(trx, JSON.stringify(frontier), JSON.stringify(predecessors));
  }
  return { rows: found, rowids };
}

type LevelRow = [id: string, profile: string, compacted_from: string | null, rowid: number];

/** The children and successors of `parents`, and the sessions `ids` themselves, as [id, profile, compacted_from, rowid]. */
async function closureLevel(trx: Trx, parents: string, ids: string): Promise<LevelRow[]> {
  const res = await sql<{ rows: string }>`
    select json_group_array(json_array(id, profile, compacted_from, rid)) as rows from (
      select c.id, c.profile, c.compacted_from, c.rowid as rid from json_each(${parents}) j cross join sessions c on c.parent_session_id = j.value
      union all select c.id, c.profile, c.compacted_from, c.rowid from json_each(${parents}) j cross join sessions c on c.compacted_from = j.value
      union all select c.id, c.profile, c.compacted_from, c.rowid from json_each(${ids}) j cross join sessions c on c.id = j.value)`.execute(trx);
  return JSON.parse(res.rows[0]?.rows ?? "[]") as LevelRow[];
}

/** Archives the seeds that are not archived yet; only real flips are returned. */
async function archiveIn(trx: Trx, seedJson: string, now: number): Promise<Removed> {
  const res = await sql<{ id: string; profile: string }>`
    update sessions set archived = 1, updated_at = ${now}
    where archived = 0 and id in (select value from json_each(${seedJson}))
    returning id, profile`.execute(trx);
  return new Map(res.rows.map((r) => [r.id, r.profile]));
}
