// The hook catalogue: every hook the core emits, its payload fields and whether its return is used.
// This is the contract plugins are written against (SPEC "Hooks"); payload schemas double as the
// documentation served by GET /v1/hooks and as test oracles.
import * as v from "valibot";

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

/** Fields of each hook, without the `hook` and `schema_version` every payload also carries. */
export const HOOK_FIELDS = {
  on_session_start: v.object({ ...session, profile: v.string(), platform: v.string(), source: SourceSchema }),
  on_session_end: v.object({ ...session, reason: v.string() }),
  on_session_finalize: v.object({ ...session }),
  on_session_reset: v.object({ ...session, old_session_id: v.string() }),
  pre_llm_call: v.object({
    ...session,
    conversation_history: v.array(MessageSchema),
    user_message: v.string(),
  }),
  post_llm_call: v.object({
    ...session,
    response: v.string(),
    usage: v.object({ prompt_tokens: v.number(), completion_tokens: v.number(), total_tokens: v.number() }),
  }),
  pre_tool_call: v.object({ ...session, tool_name: v.string(), args: v.record(v.string(), v.unknown()) }),
  post_tool_call: v.object({
    ...session,
    tool_name: v.string(),
    args: v.record(v.string(), v.unknown()),
    result: v.string(),
  }),
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

/** Hooks whose return value the core uses; every other hook is an observer. */
export const HOOKS_WITH_RESULT: ReadonlySet<HookName> = new Set<HookName>(["pre_llm_call"]);

export function isHookName(name: string): name is HookName {
  return Object.hasOwn(HOOK_FIELDS, name);
}

/** What a pre_llm_call plugin may return: a non-empty string or {"context": "..."}. */
export const PreLlmResultSchema = v.union([
  v.string(),
  v.object({ context: v.string() }),
  v.null(),
]);

/** Catalogue as data, for GET /v1/hooks. */
export function describeHooks(): Array<{ hook: HookName; fields: string[]; returns_used: boolean; schema_version: number }> {
  return HOOK_NAMES.map((hook) => ({
    hook,
    fields: Object.keys(HOOK_FIELDS[hook].entries),
    returns_used: HOOKS_WITH_RESULT.has(hook),
    schema_version: SCHEMA_VERSION,
  }));
}
