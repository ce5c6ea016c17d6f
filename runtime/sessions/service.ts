// Session lifecycle: create, read, append, end/finalize, reset, unarchive, profile adoption and
// idle auto-archive. Anything that removes rows or archives by request goes through the deletion
// service instead, so that on_session_delete has exactly one source.
import { log } from "../log.ts";
import type { ResultSet } from "@libsql/client";
import { sql, type Kysely, type Transaction } from "kysely";
import type { Database } from "../storage/schema.ts";
import { failUnless, isGuardFailure } from "../storage/guard.ts";
import type { Source } from "../../hooks/catalogue.ts";
import { newId, type CoreContext } from "../context.ts";
import { AppError, conflict, notFound } from "../errors.ts";
import { estimateTokens } from "../tokens.ts";
import { sqlJson } from "../storage/sql-json.ts";
import { sourceOf, type MessageRow, type SessionRow } from "./view.ts";
import { emitSessionEnd, emitSessionStart } from "./lifecycle.ts";
import { storedText } from "./stored-text.ts";

export interface NewSession {
  profile?: string | undefined;
  platform?: string | undefined;
  source?: Partial<Source> | undefined;
  parent_session_id?: string | undefined;
}

export interface NewMessage {
  role: string;
  content: string;
  tool_name?: string | null;
}

/** A session as a running turn reads it (SessionService.turnState, turnSession). */
export type TurnSession = Pick<SessionRow, "id" | "platform" | "user_id" | "parent_session_id" | "compacted_from" | "ended_at" | "end_reason" | "token_estimate">;

/** A stored message as a running turn sees it (SessionService.turnState). */
export type TurnMessage = Pick<MessageRow, "seq" | "role" | "content" | "tool_name" | "tokens">;

export interface ListFilter {
  profile?: string | undefined;
  archived?: boolean | undefined;
  limit: number;
  /** Sessions that come strictly after this id in (created_at, id) order — keyset pagination. */
  after?: string | undefined;
}

/** The 409 for work on an ended session; a rotated one names the session the conversation continues in. */
export async function endedConflict(db: Kysely<Database>, session: Pick<SessionRow, "id" | "end_reason">): Promise<AppError> {
  const next = await db.selectFrom("sessions").select("id").where("compacted_from", "=", session.id).orderBy("created_at").executeTakeFirst();
  return conflict("session_ended", `session ${session.id} has ended (${session.end_reason ?? "ended"})${next ? `; it continues in session ${next.id}` : ""}`);
}

export class SessionService {
  constructor(private readonly ctx: CoreContext) {}

  async create(input: NewSession): Promise<SessionRow> {
    const now = this.ctx.now();
    const row = await this.ctx.storage.write((trx) => insertSessionIn(trx, input, now));
    await emitSessionStart(this.ctx, row);
    return row;
  }

  /**
   * After a command ran for the session: its use marked (touch), best effort. The command's own
   * writes are committed by then: a failure here must not answer as if nothing happened (a retry
   * with the same Idempotency-Key would run the command again); it is logged, and the session only
   * looks as unused as it did before.
   */
  async markUsedByCommand(id: string): Promise<void> {
    await this.touch(id).catch((err: unknown) => log("warn", "could not mark the session used after a command", { session_id: id, error: (err as Error)?.message }));
  }

  /** Marks the session as used now (a slash command: it adds no message), for the idle and empty sweeps. */
  async touch(id: string): Promise<void> {
    const now = this.ctx.now();
    // Through batch, like every write: it waits out and retries another process's lock.
    await this.ctx.storage.batch([{ sql: "update sessions set updated_at = ?1 where id = ?2 and updated_at < ?1", args: [now, id] }]);
  }

  async find(id: string): Promise<SessionRow | undefined> {
    return (await this.ctx.storage.rows<SessionRow>("select * from sessions where id = ?", [id]))[0];
  }

  async get(id: string): Promise<SessionRow> {
    const row = await this.find(id);
    if (!row) throw notFound("session", id);
    return row;
  }

  /**
   * A page in (created_at, id) order after `f.after`: a cursor from pageCursor (it carries the row's
   * created_at, so paging goes on when that session was deleted meanwhile) or a session id.
   */
  async list(f: ListFilter): Promise<SessionRow[]> {
    const cursor = f.after === undefined ? undefined : CURSOR.exec(f.after);
    const anchor = cursor ? { created_at: Number(cursor[1]), id: cursor[2]! } : f.after === undefined ? undefined : await this.find(f.after);
    if (f.after !== undefined && anchor === undefined) {
      throw new AppError(400, "invalid_cursor", `after "${f.after}" is neither a page cursor (the previous page's next) nor the id of an existing session`);
    }
    return listQuery(this.ctx.storage.db, f, anchor).execute();
  }

  async messages(id: string, limit?: number): Promise<MessageRow[]> {
    await this.get(id);
    return this.history(id, limit);
  }

  /** The stored conversation in order; with `limit`, only the most recent messages. */
  async history(id: string, limit?: number): Promise<MessageRow[]> {
    const { storage } = this.ctx;
    if (limit === undefined) return storage.rows<MessageRow>("select * from messages where session_id = ? order by seq", [id]);
    return (await storage.rows<MessageRow>("select * from messages where session_id = ? order by seq desc limit ?", [id, limit])).reverse();
  }

  /** The columns of the session a turn uses (a streamed turn checks it before it starts). */
  async turnSession(id: string): Promise<TurnSession> {
    const row = (await this.ctx.storage.rows<TurnSession>(TURN_SESSION_SQL, [id]))[0];
    if (!row) throw notFound("session", id);
    return row;
  }

  /** The 409 for a turn on an ended session (see endedConflict). */
  endedConflict(session: Pick<SessionRow, "id" | "end_reason">): Promise<AppError> {
    return endedConflict(this.ctx.storage.db, session);
  }

  /**
   * The session and its history as a turn uses them (provider messages, hook payloads, token counts),
   * the columns it reads and no more, in ONE read of one snapshot: one round trip to a server. The
   * history crosses from the native driver as one JSON text: rows cross a column at a time, which
   * cost a 16-message read 52-60 us on Node against 35-49 us as JSON (Deno 42-58 against 30-41),
   * and the separate session read another 20-45 us.
   */
  async turnState(id: string): Promise<{ session: TurnSession; history: TurnMessage[] }> {
    const row = (await this.ctx.storage.rows<TurnSession & { history: string }>(TURN_STATE_SQL, [id]))[0];
    if (!row) throw notFound("session", id);
    const { history, ...session } = row;
    const messages = (JSON.parse(history) as Array<[number, string, string, string | null, number]>).map(
      ([seq, role, content, tool_name, tokens]): TurnMessage => ({ seq, role, content, tool_name, tokens }),
    );
    // In seq order whatever order the aggregate met the rows in (SQLite does not promise the
    // subquery's): already sorted, this is one pass.
    return { session, history: messages.sort((a, b) => a.seq - b.seq) };
  }

  /** Appends messages in one write transaction; fails with 404 if the session is gone meanwhile. */
  append(id: string, msgs: NewMessage[]): Promise<MessageRow[]> {
    return this.ctx.storage.write((trx) => appendIn(trx, id, msgs, this.ctx.now()));
  }

  /**
   * The hot append (a turn's messages): ONE write transaction of three fixed statements, sent as one
   * batch (one round trip to a remote server, no query compile): a set-based insert whose seq numbers
   * continue the session's, and the token estimate moved by the tokens added. Refused when the
   * session is gone (404), has ended meanwhile (409 session_ended), or its last message is no longer
   * `expectedTop` (409 session_busy: another process stored a turn of this session meanwhile, so
   * turns never interleave); then nothing is written.
   */
  async appendOpen(id: string, msgs: NewMessage[], expectedTop: number): Promise<{ seqs: number[]; token_estimate: number }> {
    const now = this.ctx.now();
    const values = msgs.map((m) => {
      const content = storedText(m.content);
      return { role: m.role, content, tool_name: m.tool_name ?? null, tokens: estimateTokens(content) };
    });
    const added = values.reduce((n, m) => n + m.tokens, 0);
    let results: ResultSet[] | undefined;
    try {
      results = await this.ctx.storage.batch([
        { sql: APPEND_GUARD_SQL, args: [id, expectedTop] },
        { sql: APPEND_SQL, args: [id, now, sqlJson(values), expectedTop] },
        { sql: TOUCH_SQL, args: [id, added, now] },
      ]);
    } catch (err) {
      if (!isGuardFailure(err)) {
        // The answer may have been lost after the batch committed (a database server, or the
        // network to it, that died then): "nothing was stored" made a retry store the turn twice.
        const stored = await this.appendedAfter(id, values, expectedTop).catch(() => undefined);
        if (stored) return stored;
        throw err;
      }
    }
    const [, inserted, touched] = results ?? [];
    const top = touched?.rows[0];
    if (!inserted || top === undefined || inserted.rows.length !== msgs.length) {
      const s = await this.find(id);
      if (!s) throw notFound("session", id);
      if (s.ended_at !== null) throw await this.endedConflict(s);
      throw conflict("session_busy", `session ${id} got another turn meanwhile (another process); nothing of this turn was stored: send it again`);
    }
    return { seqs: inserted.rows.map((r) => Number(r.seq)).sort((a, b) => a - b), token_estimate: Number(top.token_estimate) };
  }

  /**
   * `values` as the session's messages right after `top`: the append committed (another node's turn
   * may follow them already: its guard passed because they were there).
   */
  private async appendedAfter(id: string, values: ReadonlyArray<{ role: string; content: string; tool_name: string | null }>, top: number) {
    const [rows, session] = await Promise.all([
      this.ctx.storage.db
        .selectFrom("messages")
        .select(["seq", "role", "content", "tool_name"])
        .where("session_id", "=", id)
        .where("seq", ">", top)
        .where("seq", "<=", top + values.length)
        .orderBy("seq")
        .execute(),
      this.find(id),
    ]);
    // seq is unique per session: as many rows as values in (top, top + n] are exactly those seqs.
    const same = rows.length === values.length && rows.every((r, i) => r.role === values[i]!.role && r.content === values[i]!.content && r.tool_name === values[i]!.tool_name);
    return same && session ? { seqs: rows.map((r) => r.seq), token_estimate: session.token_estimate } : undefined;
  }

  /** Drops messages from `seq` on (a failed turn's own messages). */
  async truncateFrom(id: string, seq: number): Promise<void> {
    const now = this.ctx.now();
    await this.ctx.storage.write(async (trx) => {
      await trx.deleteFrom("messages").where("session_id", "=", id).where("seq", ">=", seq).execute();
      await refreshTokens(trx, id, now);
    });
  }

  /** Ends a session: on_session_end, then on_session_finalize. Ending an ended session does nothing. */
  async end(id: string, reason: string): Promise<{ session: SessionRow; changed: boolean }> {
    return this.ctx.sessionLocks.run(id, async () => {
      const changed = await this.markEnded(id, reason);
      const session = await this.get(id);
      if (changed) await emitSessionEnd(this.ctx, id, reason);
      return { session, changed };
    });
  }

  /**
   * Starts a fresh conversation in place of `id`: the old session ends ("reset") and a new one with
   * the same profile, platform and source begins; on_session_reset links the two.
   */
  async reset(id: string): Promise<SessionRow> {
    return this.ctx.sessionLocks.run(id, async () => {
      const old = await this.get(id);
      const ended = () => conflict("session_ended", `session ${id} has ended; reset starts from an open session`);
      if (old.ended_at !== null) throw ended();
      // The lock is this process's: another node may have ended (or reset) it since the read; the
      // conditional update tells, and then this reset is the one refused (two nodes both reset it,
      // two successors and every hook twice).
      // The end and the successor commit together: a failure between them (the database went away,
      // the process died) left an ended session with no successor, which a retry refused as ended.
      const now = this.ctx.now();
      const successor = { profile: old.profile, platform: old.platform, source: sourceOf(old), ...(old.parent_session_id ? { parent_session_id: old.parent_session_id } : {}) };
      const fresh = await this.ctx.storage.write(async (trx) => ((await endSessionIn(trx, id, "reset", now)) ? insertSessionIn(trx, successor, now) : undefined));
      if (!fresh) throw ended();
      await emitSessionEnd(this.ctx, id, "reset");
      await emitSessionStart(this.ctx, fresh);
      await this.ctx.dispatcher.emit("on_session_reset", { session_id: fresh.id, old_session_id: id });
      return fresh;
    });
  }

  /** Clears the archived flag. No hook: un-archiving removes nothing. */
  /** Brings an archived session back; `unarchived` says whether this call flipped it. */
  async unarchive(id: string): Promise<{ session: SessionRow; unarchived: boolean }> {
    const now = this.ctx.now();
    // Only a real flip touches the row: a session that was not archived keeps its updated_at.
    const res = await this.ctx.storage.write(async (trx) => {
      const flipped = await trx.updateTable("sessions").set({ archived: 0, updated_at: now }).where("id", "=", id).where("archived", "<>", 0).returningAll().executeTakeFirst();
      return flipped ? { session: flipped, unarchived: true } : { session: await trx.selectFrom("sessions").selectAll().where("id", "=", id).executeTakeFirst(), unarchived: false };
    });
    if (!res.session) throw notFound("session", id);
    return { session: res.session, unarchived: res.unarchived };
  }

  /**
   * Profile adoption: moves sessions (with their child sessions, to keep the profile invariant)
   * into `profile`. Nothing is deleted, so on_session_delete does not fire. A child whose parent
   * stays in another profile is refused (422): it would break the invariant, and profile_repair
   * would then delete it.
   */
  async adopt(ids: readonly string[], profile: string): Promise<string[]> {
    const now = this.ctx.now();
    const tree = sql`with recursive tree(id) as (
          select id from sessions where id in (select value from json_each(${JSON.stringify(ids)}))
          union select c.id from sessions c join tree t on c.parent_session_id = t.id)`;
    return this.ctx.storage.write(async (trx) => {
      const stray = await sql<{ id: string; parent: string; parent_profile: string }>`${tree}
        select c.id, p.id as parent, p.profile as parent_profile from sessions c join sessions p on p.id = c.parent_session_id
        where c.id in (select id from tree) and p.id not in (select id from tree) and p.profile <> ${profile}
        order by c.id limit 1`.execute(trx);
      const s = stray.rows[0];
      if (s) {
        throw new AppError(422, "profile_mismatch", `session ${s.id} is a child of ${s.parent} (profile ${s.parent_profile}): adopt its parent instead`);
      }
      const rows = await sql<{ id: string }>`${tree}
        update sessions set profile = ${profile}, updated_at = ${now}
        where id in (select id from tree) returning id`.execute(trx);
      return rows.rows.map((r) => r.id).sort();
    });
  }

  /** Idle auto-archive: silently archives sessions idle for `days`. Never fires on_session_delete. */
  /** `dryRun`: only lists the sessions that would be archived. */
  async idleArchive(days = this.ctx.config.retention.idle_archive_after_days, dryRun = false): Promise<string[]> {
    if (days <= 0) return [];
    const cutoff = this.ctx.now() - days * 86_400_000;
    const rows = dryRun
      ? await this.ctx.storage.db.selectFrom("sessions").select("id").where("archived", "=", 0).where("updated_at", "<", cutoff).execute()
      : await this.ctx.storage.write((trx) =>
          trx.updateTable("sessions").set({ archived: 1 }).where("archived", "=", 0).where("updated_at", "<", cutoff).returning("id").execute(),
        );
    return rows.map((r) => r.id).sort();
  }

  private markEnded(id: string, reason: string): Promise<boolean> {
    const now = this.ctx.now();
    return this.ctx.storage.write((trx) => endSessionIn(trx, id, reason, now));
  }

}

const TURN_COLUMNS = "id, platform, user_id, parent_session_id, compacted_from, ended_at, end_reason, token_estimate";
const TURN_SESSION_SQL = `select ${TURN_COLUMNS} from sessions where id = ?`;
// The history as [seq, role, content, tool_name, tokens] arrays ("[]" when there is none).
const TURN_STATE_SQL = `select ${TURN_COLUMNS}, (select json_group_array(json_array(seq, role, content, tool_name, tokens))
  from (select seq, role, content, tool_name, tokens from messages where session_id = ?1 order by seq)) as history
  from sessions where id = ?1`;

// appendOpen's statements: ?1 session id, ?2 now, ?3 JSON array of {role, content, tool_name, tokens},
// ?4 the seq the turn's history ended at. Both only act on an open session whose history is still the
// one the turn read; the uncorrelated max(seq) is computed once, before the insert.
const APPEND_SQL = `insert into messages (session_id, seq, role, content, tool_name, tokens, created_at)
  select ?1, ?4 + m.key + 1,
         m.value ->> '$.role', m.value ->> '$.content', m.value ->> '$.tool_name', m.value ->> '$.tokens', ?2
  from json_each(?3) m
  returning seq`;
const TOUCH_SQL = `update sessions set token_estimate = token_estimate + ?2, updated_at = ?3
  where id = ?1 and ended_at is null returning token_estimate`;
// Fails the whole batch unless the session is open and its history still ends at ?2: nothing of a
// refused turn is written.
const APPEND_GUARD_SQL = failUnless(`exists (select 1 from sessions where id = ?1 and ended_at is null)
  and (select coalesce(max(seq), 0) from messages where session_id = ?1) = ?2`);

/** The session list in keyset order (created_at, id); every filter combination has its index. */
/** `<created_at>-<id>`: session ids start with a letter, so a cursor is never taken for one. */
const CURSOR = /^(\d{1,16})-(.+)$/;

/** The cursor of the next page after `row` (GET /v1/sessions `next`, passed back as `after`). */
export const pageCursor = (row: Pick<SessionRow, "created_at" | "id">): string => `${row.created_at}-${row.id}`;

export function listQuery(db: Kysely<Database>, f: ListFilter, anchor?: Pick<SessionRow, "created_at" | "id">) {
  const arm = (archived: 0 | 1) => {
    let q = db.selectFrom("sessions").selectAll().where("archived", "=", archived);
    if (f.profile !== undefined) q = q.where("profile", "=", f.profile);
    // A row-value comparison is one index range; the equivalent OR is not.
    if (anchor) q = q.where((eb) => eb(eb.refTuple("created_at", "id"), ">", eb.tuple(anchor.created_at, anchor.id)));
    return q;
  };
  // Every list is served by an index that starts with archived (under profile or not): without an
  // archived filter, the two ranges are merged in (created_at, id) order, no sort, and the merge
  // stops at the limit. Two indexes fewer than one per order: a session costs 2 B-tree entries less
  // to write and to delete.
  const q = f.archived === undefined ? arm(0).unionAll(arm(1)) : arm(f.archived ? 1 : 0);
  return q.orderBy("created_at").orderBy("id").limit(f.limit);
}

/** Appends inside an open write transaction; seq numbers continue the session's sequence. */
export async function appendIn(trx: Transaction<Database>, id: string, msgs: NewMessage[], now: number): Promise<MessageRow[]> {
  const s = await trx.selectFrom("sessions").select("id").where("id", "=", id).executeTakeFirst();
  if (!s) throw notFound("session", id);
  if (msgs.length === 0) return [];
  const top = await trx.selectFrom("messages").select((eb) => eb.fn.max("seq").as("seq")).where("session_id", "=", id).executeTakeFirst();
  let seq = Number(top?.seq ?? 0);
  const rows = msgs.map((m) => {
    const content = storedText(m.content);
    return { session_id: id, seq: ++seq, role: m.role, content, tool_name: m.tool_name ?? null, tokens: estimateTokens(content), created_at: now };
  });
  const inserted = await trx.insertInto("messages").values(rows).returningAll().execute();
  await refreshTokens(trx, id, now);
  return inserted;
}

/** Recomputes a session's token estimate from its messages and touches updated_at. */
export async function refreshTokens(trx: Transaction<Database>, id: string, now: number): Promise<void> {
  await sql`update sessions set token_estimate = coalesce((select sum(tokens) from messages where session_id = ${id}), 0),
    updated_at = ${now} where id = ${id}`.execute(trx);
}

/** Inserts a new session (checked against its parent) in `trx`; returns its row. */
async function insertSessionIn(trx: Transaction<Database>, input: NewSession, now: number): Promise<SessionRow> {
  let profile = input.profile ?? "default";
  if (input.parent_session_id !== undefined) {
    const parent = await trx.selectFrom("sessions").selectAll().where("id", "=", input.parent_session_id).executeTakeFirst();
    if (!parent) throw new AppError(422, "parent_not_found", `parent session ${input.parent_session_id} not found`);
    // Profile invariant: a child lives in its parent's profile.
    if (input.profile !== undefined && input.profile !== parent.profile) {
      throw new AppError(422, "profile_mismatch", `a child session must be in its parent's profile (${parent.profile})`);
    }
    profile = parent.profile;
  }
  const values = {
    id: newId("s"),
    profile,
    platform: input.platform ?? "api",
    user_id: input.source?.user_id ?? null,
    chat_id: input.source?.chat_id ?? null,
    thread_id: input.source?.thread_id ?? null,
    parent_session_id: input.parent_session_id ?? null,
    compacted_from: null,
    created_at: now,
    updated_at: now,
  };
  return trx.insertInto("sessions").values(values).returningAll().executeTakeFirstOrThrow();
}

/** Ends session `id` in `trx` (404 when there is none): true when this did it, false when it had ended already. */
async function endSessionIn(trx: Transaction<Database>, id: string, reason: string, now: number): Promise<boolean> {
  const exists = await trx.selectFrom("sessions").select("ended_at").where("id", "=", id).executeTakeFirst();
  if (!exists) throw notFound("session", id);
  const res = await trx.updateTable("sessions").set({ ended_at: now, end_reason: reason, updated_at: now }).where("id", "=", id).where("ended_at", "is", null).executeTakeFirst();
  return res.numUpdatedRows > 0n;
}
