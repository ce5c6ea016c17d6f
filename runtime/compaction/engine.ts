// The compaction engine: plans a compaction of one session's stored conversation, applies it in one
// write transaction, and emits exactly one post_compaction after commit when the stored content
// changed. Attempts that change nothing (empty, cooldown, aborted summary, result not shorter,
// unsupported, session gone) report why and emit nothing.
import { sql } from "kysely";
import { type CompactionKind, type CompactionReason } from "../../hooks/catalogue.ts";
import { newId, type CoreContext } from "../context.ts";
import { AppError, notFound } from "../errors.ts";
import { estimateTokens } from "../tokens.ts";
import { SummaryAborted, type NativeCompaction, type Provider } from "../providers/types.ts";
import { rowsToChat } from "../sessions/chat.ts";
import { endedConflict, refreshTokens } from "../sessions/service.ts";
import type { MessageRow, SessionRow } from "../sessions/view.ts";
import { emitSessionEnd, emitSessionStart } from "../sessions/lifecycle.ts";
import { log } from "../log.ts";
import { storedText } from "../sessions/stored-text.ts";

export const SKIP_REASONS = ["empty", "cooldown", "aborted", "not_shorter", "unsupported", "gone"] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

export interface CompactRequest {
  session_id: string;
  kind: CompactionKind;
  reason: CompactionReason;
  /** summarize only: continue in a new session (compacted_from = old) instead of in place. */
  rotate?: boolean | undefined;
  /** Messages from this seq on are never summarized (a running turn's own user message and after). */
  protect_from_seq?: number | undefined;
}

export interface CompactOutcome {
  compacted: boolean;
  skipped: SkipReason | null;
  detail: string | null;
  session_id: string;
  old_session_id: string;
  kind: CompactionKind;
  reason: CompactionReason;
  before_tokens: number;
  after_tokens: number;
  messages_removed: number | null;
}

/** A planned change: rows to drop, rows to rewrite, and the summary that replaces the dropped ones. */
interface Plan {
  remove: MessageRow[];
  rewrite: Array<{ row: MessageRow; content: string }>;
  summary: { seq: number; content: string } | null;
  messages_removed: number | null;
}

/** Reasons a human or a provider asked for; every other reason is automatic and obeys the cooldown. */
const UNTHROTTLED: ReadonlySet<CompactionReason> = new Set(["manual", "overflow", "provider", "unknown"]);
const PRUNED = /^\[tool result pruned: \d+ chars\]$/;

/** Triggers by which a provider says it compacted because its own context filled up. */
const PROVIDER_TRIGGERS: ReadonlySet<string> = new Set(["context_window", "provider", "context_length", "auto"]);

/**
 * Maps what a provider said about its own compaction onto a post_compaction reason: `provider` for a
 * recognised own trigger, else `unknown` — never passed through as another reason (a gateway saying
 * "manual" did not get a manual /compress from this host).
 */
export function reasonForTrigger(trigger: string | undefined): CompactionReason {
  return trigger !== undefined && PROVIDER_TRIGGERS.has(trigger) ? "provider" : "unknown";
}

export class CompactionEngine {
  constructor(
    private readonly ctx: CoreContext,
    private readonly provider: Provider,
  ) {}

  /** Entry point for callers that do not hold the session lock (HTTP, CLI, /compress, hygiene). */
  compact(req: CompactRequest): Promise<CompactOutcome> {
    return this.ctx.sessionLocks.run(req.session_id, () => this.compactLocked(req));
  }

  /** For callers that already hold the session lock (a running turn). */
  async compactLocked(req: CompactRequest): Promise<CompactOutcome> {
    // Refused rather than silently compacting in place: the caller asked for a new session id.
    if (req.rotate === true && req.kind !== "summarize") throw new AppError(400, "invalid_request", `rotate applies to kind summarize only, not ${req.kind}`);
    const session = await this.session(req.session_id);
    if (req.reason === "manual" && session.ended_at !== null) throw await endedConflict(this.ctx.storage.db, session);
    const rows = await this.rows(session.id);
    const before = sumTokens(rows);
    const skip = (skipped: SkipReason, detail: string | null = null) => this.outcome(req, session.id, "", before, before, null, skipped, detail);
    if (rows.length === 0) return skip("empty", "the session has no messages yet");
    const cooldownMs = this.ctx.config.compaction.cooldown_seconds * 1000;
    if (!UNTHROTTLED.has(req.reason) && session.last_compaction_at !== null && this.ctx.now() - session.last_compaction_at < cooldownMs) {
      return skip("cooldown", `compacted less than compaction.cooldown_seconds (${this.ctx.config.compaction.cooldown_seconds} s) ago`);
    }
    let plan: Plan | null | undefined;
    try {
      plan = await this.plan(req.kind, rows, req.protect_from_seq ?? Infinity);
    } catch (err) {
      if (err instanceof SummaryAborted) return skip("aborted", err.message);
      throw err;
    }
    if (plan === undefined) return skip("unsupported", `provider ${this.provider.name} has no native compaction`);
    if (plan === null) return skip("empty", this.nothingToDo(req.kind, rows.length));
    return this.apply(req, session, rows, plan);
  }

  /** A provider compacted its context itself: mirror it in storage (kind provider_native). */
  async applyNative(sessionId: string, seen: ReadonlyArray<Pick<MessageRow, "seq" | "tokens">>, native: NativeCompaction): Promise<CompactOutcome> {
    const req: CompactRequest = { session_id: sessionId, kind: "provider_native", reason: reasonForTrigger(native.trigger) };
    const session = await this.session(sessionId);
    // `seen` is the stored history the provider was given; it replaced the first `replaced` of it.
    const named = seen.slice(0, native.replaced);
    if (native.replaced > seen.length || named.length === 0 || native.summary.trim() === "") {
      log("warn", "ignoring provider compaction that does not match the stored history", { session: sessionId, replaced: native.replaced });
      const before = sumTokens(seen);
      return this.outcome(req, sessionId, "", before, before, null, "empty", "provider compaction did not match the history");
    }
    const rows = await this.rows(sessionId);
    const last = named.at(-1)!.seq;
    const replaced = rows.filter((r) => r.seq <= last);
    const plan: Plan = { remove: replaced, rewrite: [], summary: { seq: last, content: storedText(native.summary) }, messages_removed: replaced.length };
    return this.apply(req, session, rows, plan);
  }

  /** null: nothing to compact; undefined: the provider cannot do this kind. */
  private async plan(kind: CompactionKind, rows: MessageRow[], protectFrom: number): Promise<Plan | null | undefined> {
    const keep = this.ctx.config.compaction.keep_recent_messages;
    const tail = rows.slice(0, Math.max(0, rows.length - keep));
    // Summaries never swallow the running turn; pruning a tool result is fine anywhere outside the tail.
    const older = kind === "prune_tool_results" ? tail : tail.filter((r) => r.seq < protectFrom);
    switch (kind) {
      case "summarize":
      case "provider_native": {
        if (older.length === 0) return null;
        if (kind === "provider_native" && !this.provider.compactNative) return undefined;
        const chat = rowsToChat(older);
        const content = kind === "summarize" ? await this.provider.summarize(chat) : await this.provider.compactNative!(chat);
        return summaryPlan(older, content);
      }
      case "micro_summarize": {
        // Only the oldest half of what is compactable: a cheap, frequent step.
        const chunk = older.slice(0, Math.ceil(older.length / 2));
        if (chunk.length < 2) return null;
        return summaryPlan(chunk, await this.provider.summarize(rowsToChat(chunk)));
      }
      case "prune_tool_results": {
        const rewrite = older
          .filter((r) => r.role === "tool" && !PRUNED.test(r.content))
          .map((row) => ({ row, content: `[tool result pruned: ${row.content.length} chars]` }));
        return rewrite.length === 0 ? null : { remove: [], rewrite, summary: null, messages_removed: 0 };
      }
    }
  }

  /** Why a plan came out empty, in the operator's words (compress right after a turn lands here). */
  private nothingToDo(kind: CompactionKind, messages: number): string {
    const keep = this.ctx.config.compaction.keep_recent_messages;
    const kept = `the last ${keep} messages (compaction.keep_recent_messages) are always kept as they are`;
    if (kind === "prune_tool_results") return `no tool results older than the last ${keep} messages to prune`;
    if (kind === "micro_summarize") {
      return `fewer than 2 messages to fold: micro_summarize folds the older half of what is compactable; ${kept}, and this session has ${messages}, so it needs at least ${keep + 3}`;
    }
    return `nothing old enough to compact: ${kept}, and this session has ${messages}`;
  }

  private async apply(req: CompactRequest, session: SessionRow, rows: MessageRow[], plan: Plan): Promise<CompactOutcome> {
    const before = sumTokens(rows);
    const after =
      before -
      sumTokens(plan.remove) -
      plan.rewrite.reduce((n, w) => n + w.row.tokens - estimateTokens(w.content), 0) +
      (plan.summary ? estimateTokens(plan.summary.content) : 0);
    if (after >= before) {
      return this.outcome(req, session.id, "", before, before, null, "not_shorter", `compacting would not make it shorter (${after} >= ${before} tokens)`);
    }
    const rotate = req.rotate === true;
    const now = this.ctx.now();
    const fingerprint = rows.length === 0 ? "0:0" : `${rows.length}:${rows.at(-1)!.seq}`;
    const targetId = await this.ctx.storage.write(async (trx) => {
      // Re-check inside the transaction: a concurrent delete wins; nothing is resurrected.
      // A rotation needs the session still open: another process may have rotated it meanwhile
      // (its messages stay as they were, so the fingerprint alone would not tell) — never fork it.
      const live = await sql<{ n: number; top: number | null; exists_: number; open_: number }>`
        select (select count(*) from messages where session_id = ${session.id}) as n,
               (select max(seq) from messages where session_id = ${session.id}) as top,
               (select count(*) from sessions where id = ${session.id}) as exists_,
               (select count(*) from sessions where id = ${session.id} and ended_at is null) as open_`.execute(trx);
      const l = live.rows[0]!;
      if (Number(l.exists_) === 0) return null;
      if (`${Number(l.n)}:${Number(l.top ?? 0)}` !== fingerprint) return undefined;
      if (rotate && Number(l.open_) === 0) return undefined;
      if (!rotate) {
        const removeIds = plan.remove.map((r) => r.id);
        if (removeIds.length > 0) await sql`delete from messages where id in (select value from json_each(${JSON.stringify(removeIds)}))`.execute(trx);
        if (plan.summary) {
          await trx
            .insertInto("messages")
            .values({ session_id: session.id, seq: plan.summary.seq, role: "summary", content: plan.summary.content, tool_name: null, tokens: estimateTokens(plan.summary.content), created_at: now })
            .execute();
        }
        for (const w of plan.rewrite) {
          await trx.updateTable("messages").set({ content: w.content, tokens: estimateTokens(w.content) }).where("id", "=", w.row.id).execute();
        }
        await refreshTokens(trx, session.id, now);
        await trx.updateTable("sessions").set({ last_compaction_at: now }).where("id", "=", session.id).execute();
        return session.id;
      }
      const id = newId("s");
      const removed = new Set(plan.remove.map((r) => r.id));
      const kept = rows.filter((r) => !removed.has(r.id));
      const contents = [{ role: "summary", content: plan.summary!.content, tool_name: null as string | null }, ...kept];
      await trx
        .insertInto("sessions")
        .values({ ...session, id, compacted_from: session.id, archived: 0, ended_at: null, end_reason: null, last_compaction_at: now, created_at: now, updated_at: now })
        .execute();
      await trx
        .insertInto("messages")
        .values(contents.map((m, i) => ({ session_id: id, seq: i + 1, role: m.role, content: m.content, tool_name: m.tool_name, tokens: estimateTokens(m.content), created_at: now })))
        .execute();
      await refreshTokens(trx, id, now);
      await trx.updateTable("sessions").set({ ended_at: now, end_reason: "compacted", last_compaction_at: now, updated_at: now }).where("id", "=", session.id).execute();
      return id;
    });
    if (targetId === null) return this.outcome(req, session.id, "", before, before, null, "gone", "session was deleted meanwhile");
    if (targetId === undefined) return this.outcome(req, session.id, "", before, before, null, "empty", await this.changedMeanwhile(session.id));
    const out = this.outcome(req, targetId, rotate ? session.id : "", before, after, plan.messages_removed, null, null);
    if (rotate) {
      // A rotation ends one session and starts another: their lifecycle hooks fire as for /reset
      // (a plugin that tracks open sessions sees both), then post_compaction links the two.
      await emitSessionEnd(this.ctx, session.id, "compacted");
      await emitSessionStart(this.ctx, { ...session, id: targetId });
    }
    await this.ctx.dispatcher.emit("post_compaction", {
      session_id: out.session_id,
      old_session_id: out.old_session_id,
      kind: out.kind,
      reason: out.reason,
      before_tokens: out.before_tokens,
      after_tokens: out.after_tokens,
      messages_removed: out.messages_removed,
    });
    return out;
  }

  private outcome(
    req: CompactRequest,
    session_id: string,
    old_session_id: string,
    before_tokens: number,
    after_tokens: number,
    messages_removed: number | null,
    skipped: SkipReason | null,
    detail: string | null,
  ): CompactOutcome {
    return { compacted: skipped === null, skipped, detail, session_id, old_session_id, kind: req.kind, reason: req.reason, before_tokens, after_tokens, messages_removed };
  }

  /**
   * Why a compaction found its conversation changed when it came to write: another process's turn,
   * or its compaction or reset that ended the session (then where it continues: a retry is refused).
   */
  private async changedMeanwhile(id: string): Promise<string> {
    const now = await this.ctx.storage.db.selectFrom("sessions").select(["id", "end_reason", "ended_at"]).where("id", "=", id).executeTakeFirst();
    if (now?.ended_at == null) return "conversation changed meanwhile; nothing compacted";
    return `${(await endedConflict(this.ctx.storage.db, now)).message}; nothing compacted`;
  }

  private async session(id: string): Promise<SessionRow> {
    const s = await this.ctx.storage.db.selectFrom("sessions").selectAll().where("id", "=", id).executeTakeFirst();
    if (!s) throw notFound("session", id);
    return s;
  }

  private rows(id: string): Promise<MessageRow[]> {
    return this.ctx.storage.db.selectFrom("messages").selectAll().where("session_id", "=", id).orderBy("seq").execute();
  }
}

function summaryPlan(replaced: MessageRow[], content: string): Plan {
  if (content.trim() === "") throw new SummaryAborted("empty summary");
  return { remove: replaced, rewrite: [], summary: { seq: replaced.at(-1)!.seq, content: storedText(content) }, messages_removed: replaced.length };
}

const sumTokens = (rows: ReadonlyArray<{ tokens: number }>) => rows.reduce((n, r) => n + r.tokens, 0);
