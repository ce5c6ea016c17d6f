// The one interface every model provider implements. Turns and compaction's summarizer both go
// through it, so swapping the local provider for an HTTP one changes nothing else.
export interface ToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
  /**
   * Set when the model's arguments were not a JSON object (args is then {}): the call gives the
   * model an error result saying so, as invalid arguments do, and the turn goes on.
   */
  args_error?: string;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** assistant: the tool calls it asked for. */
  tool_calls?: ToolCall[];
  /** tool: which call this answers, and the tool's name. */
  tool_call_id?: string;
  name?: string;
}

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/**
 * The provider compacted the context itself: it replaced the first `replaced` messages of the
 * request by `summary`, counted from the request's first message (a leading system message of the
 * plugins' durable sections included: the host takes it off before it removes stored rows).
 */
export interface NativeCompaction {
  summary: string;
  replaced: number;
  /** Why the provider did it; mapped onto a post_compaction reason ("unknown" when unrecognized). */
  trigger?: string | undefined;
}

export interface ProviderReply {
  content: string;
  tool_calls: ToolCall[];
  usage: Usage;
  native_compaction?: NativeCompaction | undefined;
}

export interface CompletionRequest {
  messages: ChatMessage[];
  tools: ToolSpec[];
}

/** Streaming: the provider calls onDelta with each piece of the answer's text as it arrives. */
export interface StreamOptions {
  onDelta?: ((text: string) => void) | undefined;
}

export interface Provider {
  readonly name: string;
  /** The model this provider answers with (payload field `model` of the hooks). */
  readonly model: string;
  complete(req: CompletionRequest, stream?: StreamOptions): Promise<ProviderReply>;
  /** A summary of `messages`; throws SummaryAborted when it cannot produce one. */
  summarize(messages: ChatMessage[]): Promise<string>;
  /** Provider-native compaction of `messages`, when the provider has one. */
  compactNative?(messages: ChatMessage[]): Promise<string>;
}

/** The prompt does not fit the model's context window; the turn compacts and retries once. */
export class ContextOverflowError extends Error {
  override name = "ContextOverflowError";
}

/** The provider failed (network, HTTP status, malformed reply). */
export class ProviderError extends Error {
  override name = "ProviderError";
}

/** The summarizer gave up or returned nothing usable: the compaction is abandoned, nothing changes. */
export class SummaryAborted extends Error {
  override name = "SummaryAborted";
}

export const sumUsage = (a: Usage, b: Usage): Usage => ({
  prompt_tokens: a.prompt_tokens + b.prompt_tokens,
  completion_tokens: a.completion_tokens + b.completion_tokens,
  total_tokens: a.total_tokens + b.total_tokens,
});

export const ZERO_USAGE: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
