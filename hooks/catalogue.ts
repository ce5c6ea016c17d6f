// The hook catalogue: every hook the core emits, its payload fields and whether its return is used.
// This is the contract plugins are written against (SPEC "Hooks"); payload schemas double as the
// documentation served by GET /v1/hooks and as test oracles.
import { toJsonSchema } from "@valibot/to-json-schema";
import * as v from "valibot";
import { wholeRecord } from "./whole-record.ts";

export const SCHEMA_VERSION = 1;

export const COMPACTION_KINDS = ["summarize", "micro_summarize", "prune_tool_results", "provider_native"] as const;
export type CompactionKind = (typeof COMPACTION_KINDS)[number];

export const COMPACTION_REASONS = [
  "manual",
  "pre_api",
  "post_tool",
  "overflow",
  "gateway_hygiene",
  "between_turns",
  "proactive_prune",
  "provider",
  "unknown",
] as const;
export type CompactionReason = (typeof COMPACTION_REASONS)[number];

export const DELETE_REASONS = ["delete", "archive", "empty_sweep", "prune", "ghost_prune", "profile_repair"] as const;
export type DeleteReason = (typeof DELETE_REASONS)[number];

const SourceSchema = v.object({
  user_id: v.nullable(v.string()),
  chat_id: v.nullable(v.string()),
  thread_id: v.nullable(v.string()),
});
export type Source = v.InferOutput<typeof SourceSchema>;

const MessageSchema = v.object({ role: v.string(), content: v.string() });

const session = { session_id: v.string() };
// A JSON object: valibot's record takes an array too, as an object (a modify directive's [1, 2]
// became {"0":1,"1":2}), so arrays are told apart before it.
const Args = v.pipe(
  v.unknown(),
  v.check((x) => !Array.isArray(x), "args must be a JSON object, not an array"),
  wholeRecord(v.string(), v.unknown()),
);
const UsageSchema = v.object({ prompt_tokens: v.number(), completion_tokens: v.number(), total_tokens: v.number() });
/** How a tool call ended: ran, failed (error says why) or blocked by a pre_tool_call directive. */
export const TOOL_STATUSES = ["ok", "error", "blocked"] as const;
export type ToolStatus = (typeof TOOL_STATUSES)[number];
const toolCall = { ...session, turn_id: v.string(), tool_call_id: v.string(), tool_name: v.string(), args: Args };
const toolResult = {
  ...toolCall,
  result: v.string(),
  duration_ms: v.number(),
  status: v.picklist(TOOL_STATUSES),
  error: v.nullable(v.string()),
};

/** Fields of each hook, without the `hook` and `schema_version` every payload also carries. */
export const HOOK_FIELDS = {
  on_session_start: v.object({ ...session, profile: v.string(), platform: v.string(), source: SourceSchema, model: v.string() }),
  on_session_end: v.object({ ...session, reason: v.string() }),
  on_session_finalize: v.object({ ...session }),
  on_session_reset: v.object({ ...session, old_session_id: v.string() }),
  pre_llm_call: v.object({
    ...session,
    conversation_history: v.array(MessageSchema),
    user_message: v.string(),
    platform: v.string(),
    model: v.string(),
    turn_id: v.string(),
    is_first_turn: v.boolean(),
    user_id: v.nullable(v.string()),
    parent_session_id: v.nullable(v.string()),
  }),
  post_llm_call: v.object({ ...session, response: v.string(), usage: UsageSchema, user_message: v.string(), model: v.string(), turn_id: v.string() }),
  pre_tool_call: v.object(toolCall),
  post_tool_call: v.object(toolResult),
  transform_tool_result: v.object(toolResult),
  transform_llm_output: v.object({ ...session, turn_id: v.string(), response: v.string() }),
  post_compaction: v.object({
    ...session,
    old_session_id: v.string(),
    kind: v.picklist(COMPACTION_KINDS),
    reason: v.picklist(COMPACTION_REASONS),
    before_tokens: v.number(),
    after_tokens: v.number(),
    messages_removed: v.nullable(v.number()),
  }),
  on_session_delete: v.object({
    ...session,
    reason: v.picklist(DELETE_REASONS),
    profile: v.string(),
    deleted_ids: v.array(v.string()),
    sessions_dir: v.string(),
  }),
} as const;

export type HookName = keyof typeof HOOK_FIELDS;
export const HOOK_NAMES = Object.keys(HOOK_FIELDS) as HookName[];
export type HookFields<H extends HookName> = v.InferOutput<(typeof HOOK_FIELDS)[H]>;
export type HookPayload<H extends HookName> = HookFields<H> & { hook: H; schema_version: number };

/** Hooks whose return value the core uses; every other hook is an observer (its output is ignored). */
export const RETURNS_USED: ReadonlySet<HookName> = new Set<HookName>(["pre_llm_call", "pre_tool_call", "transform_tool_result", "transform_llm_output"]);

export function isHookName(name: string): name is HookName {
  return Object.hasOwn(HOOK_FIELDS, name);
}

/** What a pre_llm_call plugin may return: a non-empty string or {"context": "..."}. */
export const PreLlmResultSchema = v.union([
  v.string(),
  v.object({ context: v.string() }),
  v.null(),
]);

/**
 * The most JSON text a pre_tool_call `modify` may write as arguments, whatever the plugin's own
 * max_output_bytes: the arguments go on to every post_tool_call and transform_tool_result plugin,
 * the turn's answer and its history (a 1 MiB rewrite ran another plugin out of fuel on every call).
 */
export const MAX_MODIFY_ARGS_CHARS = 64 * 1024;

/** What a pre_tool_call plugin may return: nothing, or a block / modify directive. */
export const ToolDirectiveSchema = v.union([
  v.null(),
  v.object({ action: v.literal("allow") }),
  v.object({ action: v.literal("block"), message: v.optional(v.string(), "blocked by a plugin") }),
  v.object({
    action: v.literal("modify"),
    args: v.pipe(Args, v.check((a) => JSON.stringify(a).length <= MAX_MODIFY_ARGS_CHARS, `args may hold at most ${MAX_MODIFY_ARGS_CHARS} characters of JSON`)),
  }),
]);
export type ToolDirective = v.InferOutput<typeof ToolDirectiveSchema>;

/**
 * What a transform hook may return: nothing (keep), a string, or an object with its own key
 * ("result" for transform_tool_result, "response" for transform_llm_output). The other hook's key
 * is a bad output, not nothing: taken as nothing, it was ignored without a word.
 */
const transformResult = <K extends string>(key: K) => v.union([v.null(), v.string(), v.object({ [key]: v.string() } as Record<K, v.StringSchema<undefined>>)]);
export const TransformToolResultSchema = transformResult("result");
export const TransformLlmOutputSchema = transformResult("response");

/** The full payload schema of `hook` (fields plus `hook` and `schema_version`). */
export function payloadSchema(hook: HookName) {
  return v.object({ hook: v.literal(hook), schema_version: v.literal(SCHEMA_VERSION), ...HOOK_FIELDS[hook].entries });
}

/** Catalogue as data, for GET /v1/hooks: each payload's JSON Schema is generated from its valibot schema. */
export function describeHooks(): Array<{ hook: HookName; fields: string[]; returns_used: boolean; schema_version: number; schema: unknown }> {
  return HOOK_NAMES.map((hook) => ({
    hook,
    fields: Object.keys(HOOK_FIELDS[hook].entries),
    returns_used: RETURNS_USED.has(hook),
    schema_version: SCHEMA_VERSION,
    schema: toJsonSchema(payloadSchema(hook), { typeMode: "input", errorMode: "ignore" }),
  }));
}
