// One turn of the agent: a slash command runs its command; anything else goes
//   user message stored -> pre_llm_call (context injected into THIS model call only)
//   -> provider (tool calls: pre_tool_call, tool, post_tool_call, back to the provider)
//   -> post_llm_call -> assistant message stored,
// with the automatic compactions at their points (pre_api, post_tool, overflow, provider,
// between_turns, proactive_prune). Turns of one session run one at a time (session lock).
// Write path: the history is read once per turn and the turn's messages (user, tool results,
// answer) are stored in ONE write transaction when the answer is in (see TurnLog); only a
// compaction in the middle of a turn stores them earlier, because it must see them.
import type { CommandRegistry } from "../commands/registry.ts";
import { parseSlash } from "../commands/registry.ts";
import type { CompactionEngine, CompactOutcome } from "../compaction/engine.ts";
import { newId, type CoreContext } from "../context.ts";
import { AppError } from "../errors.ts";
import { estimateTokens } from "../tokens.ts";
import { ContextOverflowError, ProviderError, sumUsage, ZERO_USAGE, type ChatMessage, type Provider, type ProviderReply, type StreamOptions } from "../providers/types.ts";
import type { SessionService } from "../sessions/service.ts";
import { sourceOf } from "../sessions/view.ts";
import type { ToolRegistry } from "../tools/registry.ts";
import type { ToolRun, TurnEventSink, TurnResult } from "./events.ts";
import { capInjections, TurnPrompt } from "./injection.ts";
import { TurnLog } from "./turn-log.ts";
import { firstReplacement, runToolCall, type ToolStepDeps } from "./tool-step.ts";
import { storedText } from "../sessions/stored-text.ts";
import type { PluginHost } from "../plugins/host.ts";

export type { ToolRun, TurnResult } from "./events.ts";

/** How many model calls one turn may make (tool rounds + the answer). */
const MAX_MODEL_CALLS = 5;
/** pre_llm_call sees this many recent messages, */
const HISTORY_FOR_HOOK = 20;
/**
 * each cut to this many characters: every subscriber gets the history in its memory, and twenty
 * messages of 1 MB (a transform plugin's answers) made every plugin with 4 MiB fail as memory each
 * turn until it was quarantined.
 */
const HOOK_MESSAGE_CHARS = 8_000;
/**
 * A transform_llm_output replacement may be this long, or as long as the answer it replaces: a
 * longer one is not taken (the next plugin's may be). The longest message a user may send.
 */
const MAX_REPLACEMENT_CHARS = 100_000;

/** `content` as a hook's history carries it: cut at HOOK_MESSAGE_CHARS, saying how much was left out. */
function forHook(content: string): string {
  if (content.length <= HOOK_MESSAGE_CHARS) return content;
  // Not between the two halves of a surrogate pair.
  const end = /[\uD800-\uDBFF]/.test(content[HOOK_MESSAGE_CHARS - 1]!) ? HOOK_MESSAGE_CHARS - 1 : HOOK_MESSAGE_CHARS;
  return `${content.slice(0, end)}\n[cut for hooks: ${content.length - end} of ${content.length} characters left out]`;
}

/**
 * Tries of a turn that lost the race for its session against another process (each try pauses a
 * little longer, at random, so two nodes busy on one session part).
 */
const BUSY_ATTEMPTS = 25;

export class TurnService {
  constructor(
    private readonly ctx: CoreContext,
    private readonly sessions: SessionService,
    private readonly compaction: CompactionEngine,
    private readonly provider: Provider,
    private readonly tools: ToolRegistry,
    private readonly commands: CommandRegistry,
    /** Plugins' durable system-prompt sections for a session and its compaction predecessors. */
    private readonly promptSections: (sessionIds: readonly string[]) => Array<{ plugin: string; text: string }> = () => [],
    /** Whether a fail-closed guard is running, and its status when it is not. */
    plugins?: Pick<PluginHost, "get" | "running" | "settled">,
  ) {
    const { tool_result_max_bytes, fail_closed } = ctx.config.plugins;
    this.toolDeps = { dispatcher: ctx.dispatcher, tools, maxResultBytes: tool_result_max_bytes, failClosed: new Set(fail_closed), plugins };
  }

  private readonly toolDeps: ToolStepDeps;

  /** Runs one turn; `events` (a streamed turn) hears of its steps as they happen. */
  async run(sessionId: string, text: string, events?: TurnEventSink): Promise<TurnResult> {
    const slash = parseSlash(text);
    if (slash) {
      const s = await this.sessions.get(sessionId);
      // A turn on an ended session is refused whatever it holds (a command would act for it).
      if (s.ended_at !== null) throw await this.sessions.endedConflict(s);
      const output = await this.commands.run(slash.name, slash.raw_args, { session_id: s.id, platform: s.platform, source: sourceOf(s) });
      // A command adds no message: without this, a session used only for commands looked unused to
      // the empty sweep and the idle archive. A refused or failed command changes nothing.
      await this.sessions.markUsedByCommand(s.id);
      return { type: "command", session_id: s.id, command: slash.name, output };
    }
    return this.ctx.sessionLocks.run(sessionId, async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          const result = await this.chat(sessionId, text, events);
          // The turn's answer goes out once its plugins' KV writes are committed: any process on the
          // database sees them from the next request on.
          await this.ctx.kv.flush();
          return result;
        } catch (err) {
          // Another process stored a turn of this session meanwhile: this one stored nothing, so
          // it runs again on the new history (a streamed turn cannot take back what it sent).
          if (events || attempt >= BUSY_ATTEMPTS || !(err instanceof AppError) || err.code !== "session_busy") throw err;
          await new Promise((r) => setTimeout(r, 5 + Math.random() * Math.min(250, 20 * attempt)));
        }
      }
    });
  }

  private async chat(sessionId: string, text: string, events: TurnEventSink | undefined): Promise<TurnResult> {
    let { session, history } = await this.sessions.turnState(sessionId);
    if (session.ended_at !== null) throw await this.sessions.endedConflict(session);
    const compactions: CompactOutcome[] = [];
    const budget = this.ctx.config.compaction.context_budget_tokens;
    // pre_api: make room before the new message goes in.
    if (session.token_estimate + estimateTokens(text) > budget) {
      const out = await this.compaction.compactLocked({ session_id: sessionId, kind: "summarize", reason: "pre_api", protect_from_seq: Infinity });
      if (out.compacted) {
        compactions.push(out);
        ({ session, history } = await this.sessions.turnState(sessionId));
      }
    }
    const turn = new TurnLog(this.sessions, sessionId, session.token_estimate, history);
    turn.chain = await this.compactionChain(session.id, session.compacted_from);
    turn.add({ role: "user", content: text });
    const auto = async (kind: CompactOutcome["kind"], reason: CompactOutcome["reason"]) => {
      const out = await turn.compacting((protect) => this.compaction.compactLocked({ session_id: sessionId, kind, reason, protect_from_seq: protect }));
      if (out.compacted) compactions.push(out);
      return out;
    };
    const turnId = newId("t");
    events?.({ event: "turn", data: { session_id: sessionId, turn_id: turnId } });
    const pre = await this.ctx.dispatcher.emit("pre_llm_call", {
      session_id: sessionId,
      conversation_history: turn.before.slice(-HISTORY_FOR_HOOK).map((m) => ({ role: m.role, content: forHook(m.content) })),
      user_message: text,
      platform: session.platform,
      model: this.ctx.model,
      turn_id: turnId,
      // A summary stands for earlier turns (one may keep no user message), as does a predecessor.
      is_first_turn: session.compacted_from === null && !turn.before.some((m) => m.role === "user" || m.role === "summary"),
      user_id: session.user_id,
      parent_session_id: session.parent_session_id,
    });
    // Injected context rides on the current user message for this turn's model calls only.
    const injected = capInjections(sessionId, pre.injected, this.ctx.config.plugins.max_injected_chars_per_turn);

    try {
      return await this.converse(turn, turnId, new TurnPrompt(text, injected), compactions, auto, events);
    } catch (err) {
      // A failed turn leaves no half-written exchange behind: what it stored goes, so a retry is clean.
      await turn.discard();
      throw err;
    }
  }

  private async converse(
    turn: TurnLog,
    turnId: string,
    prompt: TurnPrompt,
    compactions: CompactOutcome[],
    auto: (kind: CompactOutcome["kind"], reason: CompactOutcome["reason"]) => Promise<CompactOutcome>,
    events: TurnEventSink | undefined,
  ): Promise<TurnResult> {
    const sessionId = turn.sessionId;
    const budget = this.ctx.config.compaction.context_budget_tokens;
    const text = prompt.text;
    const transcript: ChatMessage[] = [];
    const toolRuns: ToolRun[] = [];
    let usage = ZERO_USAGE;
    let reply: ProviderReply | undefined;
    // A quarantined or cooling-off transform plugin is not called: the answer streams as it comes.
    const transforming = this.ctx.dispatcher.wouldCall("transform_llm_output");
    // The injected context is announced once the model has taken it: a first call that overflowed
    // dropped it after the event had said otherwise (and the answer's `injected` was empty).
    let unannounced = events !== undefined && prompt.carried.length > 0;
    const announce = () => {
      if (!unannounced) return;
      unannounced = false;
      if (prompt.carried.length > 0) events!({ event: "injected", data: { injected: [...prompt.carried] } });
    };
    for (let call = 0; call < MAX_MODEL_CALLS; call++) {
      const lastCall = call === MAX_MODEL_CALLS - 1;
      // Text streams as it arrives (a turn with tool calls usually has none before its last call),
      // unless a plugin may replace the answer: then only the final `answer` event carries it.
      const stream: StreamOptions = events && !transforming ? { onDelta: (text) => (announce(), events({ event: "delta", data: { text } })) } : {};
      const sent = await this.callProvider(turn, prompt, transcript, lastCall, () => auto("summarize", "overflow"), stream);
      announce();
      reply = sent.reply;
      usage = sumUsage(usage, reply.usage);
      if (reply.native_compaction && reply.native_compaction.replaced > sent.historyAt) {
        // The provider counts the request's messages; the stored history starts after the plugins'
        // durable section (not stored): counted from the request's first, one stored row too many
        // was deleted, unsummarized. A compaction of that section alone changes nothing stored.
        const native = { ...reply.native_compaction, replaced: reply.native_compaction.replaced - sent.historyAt };
        const prefix = [...turn.before];
        const out = await turn.compacting(() => this.compaction.applyNative(sessionId, prefix, native));
        if (out.compacted) compactions.push(out);
      }
      if (reply.tool_calls.length === 0 || lastCall) break;
      transcript.push({ role: "assistant", content: reply.content, tool_calls: reply.tool_calls });
      for (const tc of reply.tool_calls) {
        events?.({ event: "tool_call", data: { tool_call_id: tc.id, tool_name: tc.name, args: tc.args } });
        const run = await runToolCall(this.toolDeps, { session_id: sessionId, turn_id: turnId, tool_call_id: tc.id, tool_name: tc.name, args: tc.args, args_error: tc.args_error });
        turn.add({ role: "tool", content: run.result, tool_name: tc.name });
        events?.({ event: "tool_result", data: run });
        toolRuns.push(run);
        transcript.push({ role: "tool", tool_call_id: tc.id, name: tc.name, content: run.result });
      }
      if (turn.tokens > budget) await auto("prune_tool_results", "post_tool");
    }
    // The last call is offered no tools; a model that asks for one anyway gets no tool run, and a
    // turn that would end with no text at all says why instead of storing an empty answer.
    const unanswered = reply !== undefined && reply.tool_calls.length > 0 && reply.content.trim() === "";
    const raw = unanswered ? `(no answer: the model still asked for a tool after ${MAX_MODEL_CALLS} model calls, the most one turn makes)` : (reply?.content ?? "");
    const transformed = transforming
      ? firstReplacement(await this.ctx.dispatcher.emit("transform_llm_output", { session_id: sessionId, turn_id: turnId, response: raw }), "response", Math.max(raw.length, MAX_REPLACEMENT_CHARS))
      : undefined;
    const answer = storedText(transformed?.text ?? raw);
    turn.add({ role: "assistant", content: answer });
    await turn.flush();
    await this.ctx.dispatcher.emit("post_llm_call", { session_id: sessionId, response: answer, usage, user_message: text, model: this.ctx.model, turn_id: turnId });

    // Between turns: summarize when over budget; prune old tool output when getting close.
    const tokens = turn.tokens;
    if (tokens > budget) await auto("micro_summarize", "between_turns");
    else if (tokens > budget * 0.75) await auto("prune_tool_results", "proactive_prune");
    return { type: "reply", session_id: sessionId, turn_id: turnId, reply: answer, transformed_by: transformed?.plugin ?? null, injected: [...prompt.carried], tool_calls: toolRuns, usage, compactions };
  }

  /** The session's id, then its compaction predecessors' (a rotating compaction starts a new id). */
  private async compactionChain(id: string, from: string | null): Promise<string[]> {
    const chain = [id];
    for (let hop = 0; from !== null && hop < 32; hop++) {
      chain.push(from);
      from = (await this.sessions.find(from))?.compacted_from ?? null;
    }
    return chain;
  }

  /**
   * Calls the provider. On a context overflow it drops the turn's injected context and retries;
   * only if that is not enough (or there was none) does it compact once ("overflow") and retry.
   */
  private async callProvider(
    turn: TurnLog,
    prompt: TurnPrompt,
    transcript: ChatMessage[],
    noTools: boolean,
    compactForOverflow: () => Promise<CompactOutcome>,
    stream: StreamOptions,
  ): Promise<{ reply: ProviderReply; historyAt: number }> {
    // A quarantined plugin's tools are not offered: each call would fail (its prompt section goes too).
    // A quarantined plugin's tools, and one cooling off after a time-out, are not offered.
    const { dispatcher } = this.ctx;
    const tools = noTools ? [] : this.tools.specs((plugin, tool) => dispatcher.quarantineOf(plugin) !== null || dispatcher.toolCoolingOff(plugin, tool) !== undefined);
    // Where the stored history starts in the request the reply answers (after the durable section).
    let historyAt = 0;
    // Plugins' durable sections lead every model call of the session (not stored, so no compaction
    // can summarize them away), read afresh each call so a section set during the turn applies.
    const messages = (): ChatMessage[] => {
      const sections = this.promptSections(turn.chain);
      const system: ChatMessage[] = sections.length === 0 ? [] : [{ role: "system", content: sections.map((s) => s.text).join("\n\n") }];
      historyAt = system.length;
      return [...system, ...turn.chat(), { role: "user", content: prompt.content }, ...transcript];
    };
    const attempt = async (): Promise<ProviderReply | ContextOverflowError> => {
      try {
        return await this.provider.complete({ messages: messages(), tools }, stream);
      } catch (err) {
        if (err instanceof ContextOverflowError) return err;
        throw wrapProviderError(err);
      }
    };
    let reply = await attempt();
    // Injected context goes first: a plugin's injection never costs the user's history.
    if (reply instanceof ContextOverflowError && prompt.dropInjected(turn.sessionId)) reply = await attempt();
    if (!(reply instanceof ContextOverflowError)) return { reply, historyAt };
    const out = await compactForOverflow();
    if (!out.compacted) throw new AppError(422, "context_overflow", `${reply.message}; compaction could not make room (${out.skipped})`);
    const again = await attempt();
    if (again instanceof ContextOverflowError) throw new AppError(422, "context_overflow", `${again.message} (after compaction)`);
    return { reply: again, historyAt };
  }
}

function wrapProviderError(err: unknown): unknown {
  if (err instanceof ProviderError) return new AppError(502, "provider_error", err.message);
  return err;
}
