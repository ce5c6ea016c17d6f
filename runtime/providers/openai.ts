// OpenAI-compatible chat/completions provider (OpenAI, vLLM, llama.cpp server, LiteLLM, ...).
// Replies are outside input: validated with valibot before the core trusts them.
import * as v from "valibot";
import { readStream } from "./openai-stream.ts";
import { ContextOverflowError, ProviderError, SummaryAborted, type ChatMessage, type CompletionRequest, type Provider, type ProviderReply, type StreamOptions, type ToolCall } from "./types.ts";

export interface OpenAIOptions {
  base_url: string;
  api_key?: string | undefined;
  model: string;
  timeout_seconds: number;
}

const ReplySchema = v.object({
  choices: v.pipe(
    v.array(
      v.object({
        message: v.object({
          content: v.optional(v.nullable(v.string())),
          tool_calls: v.optional(
            v.nullable(
              v.array(v.object({ id: v.string(), function: v.object({ name: v.string(), arguments: v.string() }) })),
            ),
          ),
        }),
      }),
    ),
    v.minLength(1),
  ),
  usage: v.optional(
    v.object({ prompt_tokens: v.number(), completion_tokens: v.number(), total_tokens: v.optional(v.number()) }),
  ),
  /** hookbox extension: a gateway that compacted the context itself says so here. */
  compaction: v.optional(
    v.object({ summary: v.string(), replaced: v.pipe(v.number(), v.integer(), v.minValue(1)), trigger: v.optional(v.string()) }),
  ),
});

const ErrorSchema = v.object({ error: v.object({ code: v.optional(v.nullable(v.string())), message: v.optional(v.string()) }) });

const SUMMARY_PROMPT =
  "Summarize the conversation below for your own future reference: keep decisions, facts, names and open tasks. Reply with the summary only.";

export class OpenAIProvider implements Provider {
  readonly name = "openai";
  readonly model: string;
  constructor(private readonly opts: OpenAIOptions) {
    this.model = opts.model;
  }

  async complete(req: CompletionRequest, stream: StreamOptions = {}): Promise<ProviderReply> {
    const body: Record<string, unknown> = { model: this.opts.model, messages: req.messages.map(toWire) };
    if (req.tools.length > 0) {
      body.tools = req.tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.parameters } }));
    }
    if (stream.onDelta) {
      body.stream = true;
      body.stream_options = { include_usage: true };
      const res = await this.send(body);
      const r = await readStream(res, stream.onDelta);
      return { ...r, tool_calls: r.tool_calls.filter((c) => c !== undefined).map((c) => ({ id: c.id, name: toolName(c.name), ...parseArgs(c.arguments) })) };
    }
    const json = await this.post(body);
    const parsed = v.safeParse(ReplySchema, json);
    if (!parsed.success) throw new ProviderError(`malformed chat/completions reply: ${parsed.issues[0].message}`);
    const r = parsed.output;
    const msg = r.choices[0]!.message;
    const usage = r.usage
      ? { prompt_tokens: r.usage.prompt_tokens, completion_tokens: r.usage.completion_tokens, total_tokens: r.usage.total_tokens ?? r.usage.prompt_tokens + r.usage.completion_tokens }
      : { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    return {
      content: msg.content ?? "",
      tool_calls: (msg.tool_calls ?? []).map((c) => ({ id: c.id, name: toolName(c.function.name), ...parseArgs(c.function.arguments) })),
      usage,
      native_compaction: r.compaction,
    };
  }

  async summarize(messages: ChatMessage[]): Promise<string> {
    const transcript = messages.map((m) => `${m.role}: ${m.content}`).join("\n");
    let reply: ProviderReply;
    try {
      reply = await this.complete({ messages: [{ role: "system", content: SUMMARY_PROMPT }, { role: "user", content: transcript }], tools: [] });
    } catch (err) {
      throw new SummaryAborted(`summarizer failed: ${(err as Error).message}`);
    }
    if (reply.content.trim() === "") throw new SummaryAborted("summarizer returned an empty summary");
    return reply.content.trim();
  }

  /** POSTs to chat/completions; a non-2xx answer is thrown as the matching error, a 2xx returned unread. */
  private async send(body: unknown): Promise<Response> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.opts.api_key) headers.authorization = `Bearer ${this.opts.api_key}`;
    let res: Response;
    const url = `${this.opts.base_url.replace(/\/+$/, "")}/chat/completions`;
    try {
      res = await fetch(url, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(Math.ceil(this.opts.timeout_seconds * 1000)), // Node takes whole ms only
      });
    } catch (err) {
      // The origin only: API clients read this, and a gateway's path may hold an account or a key
      // (credentials in base_url, which fetch refuses and repeats, are cut from its words too).
      const origin = originOf(url);
      const why = whyFailed(err, this.opts.timeout_seconds).split(url).join(origin).replace(/\/\/[^/@\s]*@/g, "//"); // Deno's words repeat the URL
      throw new ProviderError(`provider request to ${origin} (provider.base_url) failed: ${why}`);
    }
    if (!res.ok) throw failureOf(res.status, await bodyText(res));
    return res;
  }

  private async post(body: unknown): Promise<unknown> {
    const res = await this.send(body);
    const text = await bodyText(res);
    try {
      return JSON.parse(text);
    } catch {
      throw new ProviderError(`provider answered ${res.status} with non-JSON body`);
    }
  }
}

const originOf = (url: string): string => {
  try {
    return new URL(url).origin;
  } catch {
    return "(an invalid URL)";
  }
};

/** Why a request failed, in words an operator can act on: fetch's own cause (refused, DNS...), or the time-out setting. */
function whyFailed(err: unknown, timeoutSeconds: number): string {
  const e = err as Error & { cause?: { message?: string; code?: string } };
  if (e.name === "TimeoutError") return `no answer within provider.timeout_seconds (${timeoutSeconds} s)`;
  const cause = e.cause?.code ?? e.cause?.message;
  return cause && !e.message.includes(cause) ? `${e.message} (${cause})` : e.message;
}

/** The body can fail too (connection dropped, time-out mid-body): still the provider's fault. */
async function bodyText(res: Response): Promise<string> {
  try {
    return await res.text();
  } catch (err) {
    throw new ProviderError(`provider request failed: ${(err as Error).message}`);
  }
}

function failureOf(status: number, text: string): Error {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return new ProviderError(`provider answered ${status} with non-JSON body`);
  }
  const e = v.safeParse(ErrorSchema, json);
  const code = e.success ? e.output.error.code : undefined;
  const message = e.success ? (e.output.error.message ?? "") : text.slice(0, 200);
  if (code === "context_length_exceeded") return new ContextOverflowError(message || "context length exceeded");
  return new ProviderError(`provider answered ${status}: ${message}`);
}

function toWire(m: ChatMessage): Record<string, unknown> {
  if (m.role === "tool") return { role: "tool", tool_call_id: m.tool_call_id ?? "", content: m.content };
  if (m.tool_calls?.length) {
    return {
      role: "assistant",
      content: m.content || null,
      tool_calls: m.tool_calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.args) } })),
    };
  }
  return { role: m.role, content: m.content };
}

/**
 * A JSON.parse reviver that makes every string and property name well-formed (a lone surrogate, raw
 * or escaped, becomes U+FFFD): a plugin reading a model's "\ud800" back as WTF-8 bytes had its KV
 * call refused as not UTF-8 (a review: five such calls quarantined a guard's hook).
 */
function wellFormed(_key: string, v: unknown): unknown {
  if (typeof v === "string") return v.isWellFormed() ? v : v.toWellFormed();
  if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).some((k) => !k.isWellFormed())) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.toWellFormed(), x]));
  }
  return v;
}

/** A tool's name as the model wrote it, well-formed (see wellFormed). */
const toolName = (name: string) => (name.isWellFormed() ? name : name.toWellFormed());

/**
 * A tool call's arguments as the model wrote them. Models now and then write text that is not a
 * JSON object: that call's result tells the model so (args_error), where failing the whole turn
 * lost it for one bad call.
 */
function parseArgs(text: string): Pick<ToolCall, "args" | "args_error"> {
  try {
    const x: unknown = JSON.parse(text || "{}", wellFormed);
    if (x && typeof x === "object" && !Array.isArray(x)) return { args: x as Record<string, unknown> };
  } catch {
    /* fall through */
  }
  return { args: {}, args_error: `the arguments are not a JSON object: ${JSON.stringify(text.slice(0, 80))}` };
}
