// A running turn's view of its session: the stored history, read once, and the messages the turn
// adds (user message, tool results, answer), held in memory and stored together in one write
// transaction. A compaction in the middle of the turn must see the turn's messages (and must not
// summarize them away), so `compacting` stores them first and re-reads the history afterwards.
import type { ChatMessage } from "../providers/types.ts";
import { rowsToChat } from "../sessions/chat.ts";
import type { NewMessage, SessionService, TurnMessage } from "../sessions/service.ts";
import { estimateTokens } from "../tokens.ts";

export class TurnLog {
  /** The session's id and its compaction predecessors' (for durable plugin prompt sections). */
  chain: readonly string[] = [];
  private pending: NewMessage[] = [];
  private pendingTokens = 0;
  /** seq of the turn's user message once it is stored; null while nothing is. */
  private firstSeq: number | null = null;
  private chatCache: ChatMessage[] | null = null;
  /** The seq the stored history ends at: the append requires it still does (turns never interleave). */
  private top: number;

  constructor(
    private readonly sessions: SessionService,
    readonly sessionId: string,
    /** The session's stored token estimate. */
    private storedTokens: number,
    /** The stored history (before the turn's user message once that is stored). */
    private history: TurnMessage[],
  ) {
    this.top = history.at(-1)?.seq ?? 0;
  }

  /** The stored conversation before this turn. */
  get before(): readonly TurnMessage[] {
    return this.history;
  }

  /** `before` as the provider sees it (built once per history read, not per model call). */
  chat(): ChatMessage[] {
    return (this.chatCache ??= rowsToChat(this.history));
  }

  /** The session's token estimate with this turn's messages counted. */
  get tokens(): number {
    return this.storedTokens + this.pendingTokens;
  }

  add(m: NewMessage): void {
    this.pending.push(m);
    this.pendingTokens += estimateTokens(m.content);
  }

  /** Stores the pending messages (one write transaction); a no-op when there are none. */
  async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const { seqs, token_estimate } = await this.sessions.appendOpen(this.sessionId, this.pending, this.top);
    this.firstSeq ??= seqs[0]!;
    this.top = seqs.at(-1)!;
    this.pending = [];
    this.pendingTokens = 0;
    this.storedTokens = token_estimate;
  }

  /**
   * Runs a compaction of the session: the turn's messages are stored first and protected from
   * summarizing (`protect` = the user message's seq); the history is re-read after a change.
   */
  async compacting<T extends { compacted: boolean }>(compact: (protect: number) => Promise<T>): Promise<T> {
    await this.flush();
    const out = await compact(this.firstSeq ?? Infinity);
    if (out.compacted) {
      const { session, history: rows } = await this.sessions.turnState(this.sessionId);
      const userSeq = this.firstSeq ?? Infinity;
      this.storedTokens = session.token_estimate;
      this.top = rows.at(-1)?.seq ?? 0;
      this.history = rows.filter((m) => m.seq < userSeq);
      this.chatCache = null;
    }
    return out;
  }

  /** A failed turn: drops what it stored (nothing unless a compaction forced an early write). */
  async discard(): Promise<void> {
    this.pending = [];
    this.pendingTokens = 0;
    if (this.firstSeq !== null) await this.sessions.truncateFrom(this.sessionId, this.firstSeq);
  }
}
