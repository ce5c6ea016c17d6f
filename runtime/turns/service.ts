// One turn of the agent: a slash command runs its command; anything else goes
//   user message stored -> pre_llm_call (context injected into THIS model call only)
//   -> provider (tool calls: pre_tool_call, tool, post_tool_call, back to the provider)
//   -> post_llm_call -> assistant message stored,
// with the automatic compactions at their points (pre_api, post_tool, overflow, provider,
// between_turns, proactive_prune). Turns of one session run one at a time (session lock).
import type { CommandRegistry } from "../commands/registry.ts";
import { parseSlash } from "../commands/registry.ts";
import type { CompactionEngine, CompactOutcome } from "../compaction/engine.ts";
import type { CoreContext } from "../context.ts";
import { AppError, conflict } from "../errors.ts";
import { estimateTokens } from "../tokens.ts";
import { ContextOverflowError, ProviderError, sumUsage, ZERO_USAGE, type ChatMessage, type Provider, type ProviderReply, type Usage } from "../providers/types.ts";
import { rowsToChat } from "../sessions/chat.ts";
import type { SessionService } from "../sessions/service.ts";
import { sourceOf, type MessageRow } from "../sessions/view.ts";
import type { Tool } from "../tools/builtin.ts";

/** How many model calls one turn may make (tool rounds + the answer). */
const MAX_MODEL_CALLS = 5;
/** pre_llm_call sees this many recent messages. */
const HISTORY_FOR_HOOK = 20;

export interface ToolRun {
  tool_name: string;
  args: Record<string, unknown>;
  result: string;
}

export type TurnResult =
  | { type: "command"; session_id: string; command: string; output: string }
  | {
      type: "reply";
      session_id: string;
      reply: string;
      injected: Array<{ plugin: string; context: string }>;
      tool_calls: ToolRun[];
      usage: Usage;
      compactions: CompactOutcome[];
    };

export class TurnService {
  constructor(
    private readonly ctx: CoreContext,
    private readonly sessions: SessionService,
    private readonly compaction: CompactionEngine,
    private readonly provider: Provider,
    private readonly tools: ReadonlyMap<string, Tool>,
    private readonly commands: CommandRegistry,
  ) {}

  async run(sessionId: string, text: string): Promise<TurnResult> {
    const slash = parseSlash(text);
    if (slash) {
      const s = await this.sessions.get(sessionId);
      const output = await this.commands.run(slash.name, slash.raw_args, { session_id: s.id, platform: s.platform, source: sourceOf(s) });
      return { type: "command", session_id: s.id, command: slash.name, output };
    }
    return this.ctx.sessionLocks.run(sessionId, () => this.chat(sessionId, text));
  }

  private async chat(sessionId: string, text: string): Promise<TurnResult> {
    const session = await this.sessions.get(sessionId);
    if (session.ended_at !== null) throw conflict("session_ended", `session ${sessionId} has ended (${session.end_reason ?? "ended"})`);
    const compactions: CompactOutcome[] = [];
    const auto = async (kind: CompactOutcome["kind"], reason: CompactOutcome["reason"]) => {
      const out = await this.compaction.compactLocked({ session_id: sessionId, kind, reason, protect_from_seq: protect });
      if (out.compacted) compactions.push(out);
      return out;
    };
    const budget = this.ctx.config.compaction.context_budget_tokens;
    let protect = Infinity;

    // pre_api: make room before the new message goes in.
    if (session.token_estimate + estimateTokens(text) > budget) await auto("summarize", "pre_api");
    const userSeq = (await this.sessions.append(sessionId, [{ role: "user", content: text }]))[0]!.seq;
    protect = userSeq;
    const recent = (await this.sessions.history(sessionId, HISTORY_FOR_HOOK + 1)).filter((m) => m.seq < userSeq);
    const pre = await this.ctx.dispatcher.emit("pre_llm_call", {
      session_id: sessionId,
      conversation_history: recent.map((m) => ({ role: m.role, content: m.content })),
      user_message: text,
    });
    // Injected context rides on the current user message for this turn's model calls only.
    const injected = pre.injected;

    try {
      return await this.converse(sessionId, userSeq, text, injected, compactions, auto);
    } catch (err) {
      // A failed turn leaves no half-written exchange behind: its messages go, so a retry is clean.
      await this.sessions.truncateFrom(sessionId, userSeq);
      throw err;
    }
  }

  private async converse(
    sessionId: string,
    userSeq: number,
    text: string,
    injected: Array<{ plugin: string; context: string }>,
    compactions: CompactOutcome[],
    auto: (kind: CompactOutcome["kind"], reason: CompactOutcome["reason"]) => Promise<CompactOutcome>,
  ): Promise<TurnResult> {
    const budget = this.ctx.config.compaction.context_budget_tokens;
    const prompt = injected.length === 0 ? text : `${text}\n\n${injected.map((i) => i.context).join("\n\n")}`;
    const transcript: ChatMessage[] = [];
    const toolRuns: ToolRun[] = [];
    let usage = ZERO_USAGE;
    let reply: ProviderReply | undefined;
    for (let call = 0; call < MAX_MODEL_CALLS; call++) {
      const lastCall = call === MAX_MODEL_CALLS - 1;
      const prefix = await this.before(sessionId, userSeq);
      reply = await this.callProvider(prefix, prompt, transcript, lastCall, async () => {
        const out = await auto("summarize", "overflow");
        return { out, prefix: await this.before(sessionId, userSeq) };
      });
      usage = sumUsage(usage, reply.usage);
      if (reply.native_compaction) {
        const out = await this.compaction.applyNative(sessionId, prefix, reply.native_compaction);
        if (out.compacted) compactions.push(out);
      }
      if (reply.tool_calls.length === 0 || lastCall) break;
      transcript.push({ role: "assistant", content: reply.content, tool_calls: reply.tool_calls });
      for (const tc of reply.tool_calls) {
        const result = await this.runTool(sessionId, tc.name, tc.args);
        toolRuns.push({ tool_name: tc.name, args: tc.args, result });
        transcript.push({ role: "tool", tool_call_id: tc.id, name: tc.name, content: result });
      }
      if ((await this.sessions.get(sessionId)).token_estimate > budget) await auto("prune_tool_results", "post_tool");
    }
    const answer = reply?.content ?? "";
    await this.sessions.append(sessionId, [{ role: "assistant", content: answer }]);
    await this.ctx.dispatcher.emit("post_llm_call", { session_id: sessionId, response: answer, usage });

    // Between turns: summarize when over budget; prune old tool output when getting close.
    const tokens = (await this.sessions.get(sessionId)).token_estimate;
    if (tokens > budget) await auto("micro_summarize", "between_turns");
    else if (tokens > budget * 0.75) await auto("prune_tool_results", "proactive_prune");
    return { type: "reply", session_id: sessionId, reply: answer, injected, tool_calls: toolRuns, usage, compactions };
  }

  /** Calls the provider; on a context overflow compacts once ("overflow") and retries. */
  private async callProvider(
    prefix: MessageRow[],
    prompt: string,
    transcript: ChatMessage[],
    noTools: boolean,
    compactForOverflow: () => Promise<{ out: CompactOutcome; prefix: MessageRow[] }>,
  ): Promise<ProviderReply> {
    const tools = noTools ? [] : [...this.tools.values()].map((t) => t.spec);
    const messages = (rows: MessageRow[]): ChatMessage[] => [...rowsToChat(rows), { role: "user", content: prompt }, ...transcript];
    try {
      return await this.provider.complete({ messages: messages(prefix), tools });
    } catch (err) {
      if (!(err instanceof ContextOverflowError)) throw wrapProviderError(err);
      const { out, prefix: shorter } = await compactForOverflow();
      if (!out.compacted) throw new AppError(422, "context_overflow", `${err.message}; compaction could not make room (${out.skipped})`);
      try {
        return await this.provider.complete({ messages: messages(shorter), tools });
      } catch (again) {
        if (again instanceof ContextOverflowError) throw new AppError(422, "context_overflow", `${again.message} (after compaction)`);
        throw wrapProviderError(again);
      }
    }
  }

  /** The stored conversation before the running turn's user message. */
  private async before(sessionId: string, userSeq: number): Promise<MessageRow[]> {
    return (await this.sessions.history(sessionId)).filter((m) => m.seq < userSeq);
  }

  private async runTool(sessionId: string, name: string, args: Record<string, unknown>): Promise<string> {
    await this.ctx.dispatcher.emit("pre_tool_call", { session_id: sessionId, tool_name: name, args });
    const tool = this.tools.get(name);
    const result = tool ? tool.run(args) : `error: unknown tool ${name}`;
    await this.sessions.append(sessionId, [{ role: "tool", content: result, tool_name: name }]);
    await this.ctx.dispatcher.emit("post_tool_call", { session_id: sessionId, tool_name: name, args, result });
    return result;
  }
}

function wrapProviderError(err: unknown): unknown {
  if (err instanceof ProviderError) return new AppError(502, "provider_error", err.message);
  return err;
}
