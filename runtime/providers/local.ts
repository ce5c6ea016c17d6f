// The built-in deterministic provider: offline, instant, the same answer every time. It echoes the
// prompt it was given (so tests can see injected context reached the model), asks for the built-in
// tools when the user asks to calculate or for the time, calls any offered tool (plugin tools too)
// on "use tool NAME {json args}", can simulate a context window (overflow) and provider-native
// compaction, summarizes by keeping the first words of each message, and streams word by word.
import { estimateTokens } from "../tokens.ts";
import { ContextOverflowError, type ChatMessage, type CompletionRequest, type Provider, type ProviderReply, type StreamOptions } from "./types.ts";

export interface LocalProviderOptions {
  /** Prompts above this many tokens fail with ContextOverflowError. */
  context_window_tokens?: number | undefined;
  /** Prompts above this many tokens are compacted by the "provider" itself (native compaction). */
  native_compaction_over_tokens?: number | undefined;
}

const CALC = /\b(?:calc|calculate|compute)\b\s*:?\s*([-+*/%().\d\s]+)/i;
const CLOCK = /\b(?:what time|clock)\b/i;
const USE_TOOL = /\buse tool ([A-Za-z0-9_-]+)[ \t]*(\{[^\n]*\})?/;

const promptTokens = (messages: ChatMessage[]) => messages.reduce((n, m) => n + estimateTokens(m.content), 0);

/** "role: first words…" per message: deterministic and usually much shorter than the input. */
export function extractiveSummary(messages: ChatMessage[], words: number): string {
  const lines = messages.map((m) => {
    const w = m.content.split(/\s+/).filter(Boolean);
    return `${m.role}: ${w.slice(0, words).join(" ")}${w.length > words ? " …" : ""}`;
  });
  return `Summary of ${messages.length} earlier messages — ${lines.join(" | ")}`;
}

export class LocalProvider implements Provider {
  readonly name = "local";
  readonly model = "local";
  constructor(private readonly opts: LocalProviderOptions = {}) {}

  async complete(req: CompletionRequest, stream: StreamOptions = {}): Promise<ProviderReply> {
    const prompt = promptTokens(req.messages);
    if (this.opts.context_window_tokens !== undefined && prompt > this.opts.context_window_tokens) {
      throw new ContextOverflowError(`prompt of ${prompt} tokens exceeds the context window of ${this.opts.context_window_tokens}`);
    }
    const reply = this.answer(req.messages, new Set(req.tools.map((t) => t.name)));
    const completion = estimateTokens(reply.content);
    reply.usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
    const over = this.opts.native_compaction_over_tokens;
    const older = req.messages.length - 2; // the provider keeps the last exchange verbatim
    if (over !== undefined && prompt > over && older > 0) {
      reply.native_compaction = { summary: await this.compactNative(req.messages.slice(0, older)), replaced: older, trigger: "context_window" };
    }
    // Word by word (each piece keeps its following whitespace), so a streamed turn has several deltas.
    if (stream.onDelta) for (const piece of reply.content.match(/\S+\s*|\s+/g) ?? []) stream.onDelta(piece);
    return reply;
  }

  async summarize(messages: ChatMessage[]): Promise<string> {
    return extractiveSummary(messages, 6);
  }

  async compactNative(messages: ChatMessage[]): Promise<string> {
    return `[native compaction] ${extractiveSummary(messages, 3)}`;
  }

  private answer(messages: ChatMessage[], tools: Set<string>): ProviderReply {
    const last = messages.at(-1);
    const base = { tool_calls: [], usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } };
    if (!last) return { ...base, content: "Hello." };
    // A result that ends its own sentence gets no second period (an outside probe saw "..").
    if (last.role === "tool") return { ...base, content: `The ${last.name ?? "tool"} tool returned ${last.content}${/[.!?]$/.test(last.content) ? "" : "."}` };
    const use = USE_TOOL.exec(last.content);
    if (use && tools.has(use[1]!)) {
      return { ...base, content: "", tool_calls: [{ id: "call_1", name: use[1]!, args: toolArgs(use[2]) }] };
    }
    const calc = CALC.exec(last.content);
    if (calc && tools.has("calculator")) {
      return { ...base, content: "", tool_calls: [{ id: "call_1", name: "calculator", args: { expression: calc[1]!.trim() } }] };
    }
    if (CLOCK.test(last.content) && tools.has("clock")) {
      return { ...base, content: "", tool_calls: [{ id: "call_1", name: "clock", args: {} }] };
    }
    return { ...base, content: `You said: ${last.content}` };
  }
}

/** "{...}" after "use tool NAME": a JSON object, else no arguments (the tool's schema then decides). */
function toolArgs(text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  try {
    const x: unknown = JSON.parse(text);
    return x && typeof x === "object" && !Array.isArray(x) ? (x as Record<string, unknown>) : { value: x };
  } catch {
    return { text };
  }
}
