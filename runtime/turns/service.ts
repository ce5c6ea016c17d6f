// One turn of the agent: a slash command runs its command; anything else goes
//   user message stored -> pre_llm_call (context injected into THIS model call only)
//   -> provider (tool calls: pre_tool_call, tool, post_tool_call, back to the provider)
//   -> post_llm_call -> assistant message stored,
// with the automatic compactions at their points (pre_api, post_tool, overflow, provider,
// between_turns, proactive_prune). Turns of one session run one at a time (session lock).
// Write path: the history is read once per turn and the turn's messages (user, tool results,
// answer) are stored in ONE write transaction when the answer is in (see TurnLog); only a
// compaction in the middle of a turn stores them earlier, because it must see them.
import type { ToolStatus } from "../../hooks/catalogue.ts";
import type { CommandRegistry } from "../commands/registry.ts";
import { parseSlash } from "../commands/registry.ts";
import type { CompactionEngine, CompactOutcome } from "../compaction/engine.ts";
import { newId, type CoreContext } from "../context.ts";
import { AppError, conflict } from "../errors.ts";
import { estimateTokens } from "../tokens.ts";
import { ContextOverflowError, ProviderError, sumUsage, ZERO_USAGE, type ChatMessage, type Provider, type ProviderReply, type ToolSpec, type Usage } from "../providers/types.ts";
import type { SessionService } from "../sessions/service.ts";
import { sourceOf } from "../sessions/view.ts";
import { TurnLog } from "./turn-log.ts";
import type { Tool } from "../tools/builtin.ts";

/** How many model calls one turn may make (tool rounds + the answer). */
const MAX_MODEL_CALLS = 5;
/** pre_llm_call sees this many recent messages. */
const HISTORY_FOR_HOOK = 20;

export interface ToolRun {
  tool_call_id: string;
  tool_name: string;
  args: Record<string, unknown>;
  result: string;
  status: ToolStatus;
  error: string | null;
  duration_ms: number;
}

export type TurnResult =
  | { type: "command"; session_id: string; command: string; output: string }
  | {
      type: "reply";
      session_id: string;
      turn_id: string;
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
  ) {
    this.toolSpecs = [...tools.values()].map((t) => t.spec);
  }

  /** The tools offered to the model: the same on every call. */
  private readonly toolSpecs: ToolSpec[];

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
    let session = await this.sessions.get(sessionId);
    if (session.ended_at !== null) throw conflict("session_ended", `session ${sessionId} has ended (${session.end_reason ?? "ended"})`);
    const compactions: CompactOutcome[] = [];
    const budget = this.ctx.config.compaction.context_budget_tokens;
    // pre_api: make room before the new message goes in.
    if (session.token_estimate + estimateTokens(text) > budget) {
      const out = await this.compaction.compactLocked({ session_id: sessionId, kind: "summarize", reason: "pre_api", protect_from_seq: Infinity });
      if (out.compacted) {
        compactions.push(out);
        session = await this.sessions.get(sessionId);
      }
    }
    const turn = new TurnLog(this.sessions, sessionId, session.token_estimate, await this.sessions.history(sessionId));
    turn.add({ role: "user", content: text });
    const auto = async (kind: CompactOutcome["kind"], reason: CompactOutcome["reason"]) => {
      const out = await turn.compacting((protect) => this.compaction.compactLocked({ session_id: sessionId, kind, reason, protect_from_seq: protect }));
      if (out.compacted) compactions.push(out);
      return out;
    };
    const turnId = newId("t");
    const pre = await this.ctx.dispatcher.emit("pre_llm_call", {
      session_id: sessionId,
      conversation_history: turn.before.slice(-HISTORY_FOR_HOOK).map((m) => ({ role: m.role, content: m.content })),
      user_message: text,
      platform: session.platform,
      model: this.ctx.model,
      turn_id: turnId,
      is_first_turn: !turn.before.some((m) => m.role === "user"),
      user_id: session.user_id,
      parent_session_id: session.parent_session_id,
    });
    // Injected context rides on the current user message for this turn's model calls only.
    const injected = pre.injected;

    try {
      return await this.converse(turn, turnId, text, injected, compactions, auto);
    } catch (err) {
      // A failed turn leaves no half-written exchange behind: what it stored goes, so a retry is clean.
      await turn.discard();
      throw err;
    }
  }

  private async converse(
    turn: TurnLog,
    turnId: string,
    text: string,
    injected: Array<{ plugin: string; context: string }>,
    compactions: CompactOutcome[],
    auto: (kind: CompactOutcome["kind"], reason: CompactOutcome["reason"]) => Promise<CompactOutcome>,
  ): Promise<TurnResult> {
    const sessionId = turn.sessionId;
    const budget = this.ctx.config.compaction.context_budget_tokens;
    const prompt = injected.length === 0 ? text : `${text}\n\n${injected.map((i) => i.context).join("\n\n")}`;
    const transcript: ChatMessage[] = [];
    const toolRuns: ToolRun[] = [];
    let usage = ZERO_USAGE;
    let reply: ProviderReply | undefined;
    for (let call = 0; call < MAX_MODEL_CALLS; call++) {
      const lastCall = call === MAX_MODEL_CALLS - 1;
      reply = await this.callProvider(turn, prompt, transcript, lastCall, () => auto("summarize", "overflow"));
      usage = sumUsage(usage, reply.usage);
      if (reply.native_compaction) {
        const native = reply.native_compaction;
        const prefix = [...turn.before];
        const out = await turn.compacting(() => this.compaction.applyNative(sessionId, prefix, native));
        if (out.compacted) compactions.push(out);
      }
      if (reply.tool_calls.length === 0 || lastCall) break;
      transcript.push({ role: "assistant", content: reply.content, tool_calls: reply.tool_calls });
      for (const tc of reply.tool_calls) {
        const run = await this.runTool(turn, turnId, tc.id, tc.name, tc.args);
        toolRuns.push(run);
        transcript.push({ role: "tool", tool_call_id: tc.id, name: tc.name, content: run.result });
      }
      if (turn.tokens > budget) await auto("prune_tool_results", "post_tool");
    }
    const answer = reply?.content ?? "";
    turn.add({ role: "assistant", content: answer });
    await turn.flush();
    await this.ctx.dispatcher.emit("post_llm_call", { session_id: sessionId, response: answer, usage, user_message: text, model: this.ctx.model, turn_id: turnId });

    // Between turns: summarize when over budget; prune old tool output when getting close.
    const tokens = turn.tokens;
    if (tokens > budget) await auto("micro_summarize", "between_turns");
    else if (tokens > budget * 0.75) await auto("prune_tool_results", "proactive_prune");
    return { type: "reply", session_id: sessionId, turn_id: turnId, reply: answer, injected, tool_calls: toolRuns, usage, compactions };
  }

  /** Calls the provider; on a context overflow compacts once ("overflow") and retries. */
  private async callProvider(
    turn: TurnLog,
    prompt: string,
    transcript: ChatMessage[],
    noTools: boolean,
    compactForOverflow: () => Promise<CompactOutcome>,
  ): Promise<ProviderReply> {
    const tools = noTools ? [] : this.toolSpecs;
    const messages = (): ChatMessage[] => [...turn.chat(), { role: "user", content: prompt }, ...transcript];
    try {
      return await this.provider.complete({ messages: messages(), tools });
    } catch (err) {
      if (!(err instanceof ContextOverflowError)) throw wrapProviderError(err);
      const out = await compactForOverflow();
      if (!out.compacted) throw new AppError(422, "context_overflow", `${err.message}; compaction could not make room (${out.skipped})`);
      try {
        return await this.provider.complete({ messages: messages(), tools });
      } catch (again) {
        if (again instanceof ContextOverflowError) throw new AppError(422, "context_overflow", `${again.message} (after compaction)`);
        throw wrapProviderError(again);
      }
    }
  }

  private async runTool(turn: TurnLog, turnId: string, callId: string, name: string, args: Record<string, unknown>): Promise<ToolRun> {
    const call = { session_id: turn.sessionId, turn_id: turnId, tool_call_id: callId, tool_name: name, args };
    await this.ctx.dispatcher.emit("pre_tool_call", call);
    const t0 = performance.now();
    const tool = this.tools.get(name);
    const error = tool ? null : `unknown tool ${name}`;
    const result = tool ? tool.run(args) : `error: ${error}`;
    const duration_ms = performance.now() - t0;
    const status: ToolStatus = error ? "error" : "ok";
    turn.add({ role: "tool", content: result, tool_name: name });
    await this.ctx.dispatcher.emit("post_tool_call", { ...call, result, duration_ms, status, error });
    return { tool_call_id: callId, tool_name: name, args, result, status, error, duration_ms };
  }
}

function wrapProviderError(err: unknown): unknown {
  if (err instanceof ProviderError) return new AppError(502, "provider_error", err.message);
  return err;
}
