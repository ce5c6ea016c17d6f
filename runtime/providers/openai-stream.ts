// Reads a streamed chat/completions answer (server-sent events, `stream: true`): text deltas go to
// onDelta as they arrive; tool calls are assembled from their pieces (by index); usage comes from
// the last chunk (`stream_options.include_usage`). Every chunk is outside input, checked by valibot.
import * as v from "valibot";
import { ProviderError, type NativeCompaction, type Usage } from "./types.ts";

const ChunkSchema = v.object({
  choices: v.optional(
    v.array(
      v.object({
        delta: v.optional(
          v.object({
            content: v.optional(v.nullable(v.string())),
            tool_calls: v.optional(
              v.array(
                v.object({
                  index: v.number(),
                  id: v.optional(v.string()),
                  function: v.optional(v.object({ name: v.optional(v.string()), arguments: v.optional(v.string()) })),
                }),
              ),
            ),
          }),
        ),
      }),
    ),
  ),
  usage: v.optional(v.nullable(v.object({ prompt_tokens: v.number(), completion_tokens: v.number(), total_tokens: v.optional(v.number()) }))),
  compaction: v.optional(
    v.object({ summary: v.string(), replaced: v.pipe(v.number(), v.integer(), v.minValue(1)), trigger: v.optional(v.string()) }),
  ),
});

export interface StreamedReply {
  content: string;
  tool_calls: Array<{ id: string; name: string; arguments: string }>;
  usage: Usage;
  native_compaction: NativeCompaction | undefined;
}

export async function readStream(res: Response, onDelta: (text: string) => void): Promise<StreamedReply> {
  if (!res.body) throw new ProviderError("provider answered a stream without a body");
  const out: StreamedReply = { content: "", tool_calls: [], usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }, native_compaction: undefined };
  const decoder = new TextDecoder();
  let buffer = "";
  let done = false;
  try {
    for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(bytes, { stream: true });
      let cut: number;
      while (!done && (cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        done = apply(event, out, onDelta);
      }
      if (done) break;
    }
  } catch (err) {
    if (err instanceof ProviderError) throw err;
    throw new ProviderError(`provider stream failed: ${(err as Error).message}`);
  }
  if (!done && buffer.trim() !== "") done = apply(buffer, out, onDelta);
  if (!done) throw new ProviderError("provider stream ended before [DONE]");
  return out;
}

/** Applies one SSE event; true at `data: [DONE]`. */
function apply(event: string, out: StreamedReply, onDelta: (text: string) => void): boolean {
  const data = event
    .split(/\r?\n/)
    .filter((l) => l.startsWith("data:"))
    .map((l) => l.slice(5).trimStart())
    .join("\n");
  if (data === "") return false; // comments, keep-alives
  if (data === "[DONE]") return true;
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    throw new ProviderError(`provider stream sent a non-JSON chunk: ${data.slice(0, 80)}`);
  }
  const parsed = v.safeParse(ChunkSchema, json);
  if (!parsed.success) throw new ProviderError(`malformed chat/completions chunk: ${parsed.issues[0].message}`);
  const chunk = parsed.output;
  for (const choice of chunk.choices ?? []) {
    const text = choice.delta?.content;
    if (text) {
      out.content += text;
      onDelta(text);
    }
    for (const piece of choice.delta?.tool_calls ?? []) {
      const call = (out.tool_calls[piece.index] ??= { id: "", name: "", arguments: "" });
      if (piece.id) call.id = piece.id;
      if (piece.function?.name) call.name += piece.function.name;
      if (piece.function?.arguments) call.arguments += piece.function.arguments;
    }
  }
  if (chunk.usage) {
    const u = chunk.usage;
    out.usage = { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.total_tokens ?? u.prompt_tokens + u.completion_tokens };
  }
  if (chunk.compaction) out.native_compaction = chunk.compaction;
  return false;
}
