// The success bodies of the API as JSON Schema, for /openapi.json: what sessionView, messageView,
// the turn and compaction results, plugin info and the admin routes answer. The bodies are built
// from TypeScript types (no valibot schema validates them on the way out), so the test server
// checks every JSON answer the suites receive against these (test/helpers/server.ts): a field
// added, renamed or retyped without this file fails the tests, not a client.
import { COMPACTION_KINDS, COMPACTION_REASONS, HOOK_NAMES, TOOL_STATUSES } from "../../hooks/catalogue.ts";
import { FAILURE_KINDS } from "../../hooks/failures.ts";
import { SKIP_REASONS } from "../compaction/engine.ts";
import { PLUGIN_STATUSES } from "../plugins/host.ts";

type Json = Record<string, unknown>;

const str = { type: "string" };
const int = { type: "integer" };
const num = { type: "number" };
const bool = { type: "boolean" };
const nullable = (type: string) => ({ type: [type, "null"] });
/** One of these strings (a JSON Schema enum; `oneOf` below is the keyword, alternatives of schemas). */
const choice = (values: readonly string[]) => ({ type: "string", enum: [...values] });
const array = (items: Json) => ({ type: "array", items });
const ref = (name: keyof typeof RESPONSE_COMPONENTS) => ({ $ref: `#/components/schemas/${name}` });

/** An object whose listed fields are always there, except those in `optional`. */
function object(properties: Record<string, Json>, optional: readonly string[] = []): Json {
  return { type: "object", required: Object.keys(properties).filter((k) => !optional.includes(k)), properties };
}

const source = object({ user_id: nullable("string"), chat_id: nullable("string"), thread_id: nullable("string") });

const directive = {
  oneOf: [
    object({ plugin: str, action: { const: "block" }, message: str }),
    object({ plugin: str, action: { const: "modify" }, args: { type: "object" } }),
    object({ plugin: str, action: { const: "fail_closed" }, message: str }),
  ],
};

/** Reusable bodies, served as components.schemas. */
export const RESPONSE_COMPONENTS = {
  Session: object({
    id: str,
    profile: str,
    platform: str,
    source,
    parent_session_id: nullable("string"),
    compacted_from: nullable("string"),
    archived: bool,
    ended_at: nullable("integer"),
    end_reason: nullable("string"),
    token_estimate: int,
    created_at: int,
    updated_at: int,
  }),
  Message: object({ seq: int, role: str, content: str, tool_name: nullable("string"), tokens: int, created_at: int }),
  Compaction: object({
    compacted: bool,
    skipped: { enum: [...SKIP_REASONS, null] },
    detail: nullable("string"),
    session_id: str,
    old_session_id: { type: "string", description: '"" when compacted in place' },
    kind: choice(COMPACTION_KINDS),
    reason: choice(COMPACTION_REASONS),
    before_tokens: int,
    after_tokens: int,
    messages_removed: nullable("integer"),
  }),
  ToolRun: object(
    {
      tool_call_id: str,
      tool_name: str,
      args: { type: "object" },
      requested_args: { type: "object", description: "the arguments the model asked for, when a directive changed them" },
      result: str,
      status: choice(TOOL_STATUSES),
      error: nullable("string"),
      duration_ms: num,
      plugin: nullable("string"),
      directives: array(directive),
      transformed_by: nullable("string"),
    },
    ["requested_args"],
  ),
  Turn: {
    oneOf: [
      object({
        type: { const: "reply" },
        session_id: str,
        turn_id: str,
        reply: str,
        transformed_by: nullable("string"),
        injected: array(object({ plugin: str, context: str })),
        tool_calls: array({ $ref: "#/components/schemas/ToolRun" }),
        usage: object({ prompt_tokens: int, completion_tokens: int, total_tokens: int }),
        compactions: array({ $ref: "#/components/schemas/Compaction" }),
      }),
      object({ type: { const: "command" }, session_id: str, command: str, output: str }),
    ],
  },
  Plugin: object({
    name: str,
    version: nullable("string"),
    description: nullable("string"),
    hooks: array(choice(HOOK_NAMES)),
    unknown_hooks: array(str),
    unknown_fields: array(str),
    tools: array(object({ name: str, description: str })),
    system_prompt: bool,
    commands: array(object({ name: str, description: str, sensitive: bool })),
    capabilities: object({ requested: array(str), granted: array(str), ungranted: array(str) }),
    limits: { oneOf: [{ type: "null" }, object({ fuel: num, memory_pages: int, max_output_bytes: int, timeout_seconds: num })] },
    status: choice(PLUGIN_STATUSES),
    reason: nullable("string"),
    stats: {
      oneOf: [
        { type: "null" },
        object({
          calls: int,
          ok: int,
          failures: object(Object.fromEntries(FAILURE_KINDS.map((k) => [k, int]))),
          skipped_cooloff: int,
          fuel_used: num,
          latency_ms: object({ p50: num, p99: num, samples: int }),
          consecutive_failures: int,
          quarantined: nullable("string"),
          last_error: nullable("string"),
          failing_hook: nullable("string"),
          quarantined_hooks: { type: "object", additionalProperties: str },
        }),
      ],
    },
  }),
} satisfies Record<string, Json>;

const session = ref("Session");
const ids = array(str);

/** Each route's success body (keyed as ROUTE_DOCS); routes whose body is not JSON have none. */
export const RESPONSES: Record<string, Json> = {
  "GET /healthz": object({ ok: { const: true }, version: str }),
  "GET /readyz": object({
    ready: bool,
    checks: { type: "object", additionalProperties: str },
    plugins: object({ active: int, failed: int, quarantined: int, disabled: int }),
  }),
  "GET /openapi.json": object({ openapi: str, info: { type: "object" }, paths: { type: "object" } }),
  "GET /v1/health": object({ ok: { const: true } }),
  "POST /v1/sessions": object({ session }),
  "GET /v1/sessions": object({ sessions: array(session), next: { type: ["string", "null"], description: "the cursor of the next page (after=), null on the last" } }),
  "POST /v1/sessions/bulk-delete": object({ deleted_ids: ids, fired: bool }),
  "POST /v1/sessions/adopt": object({ moved_ids: ids, profile: str }),
  "GET /v1/sessions/:id": object({ session }),
  "GET /v1/sessions/:id/messages": object({ messages: array(ref("Message")) }),
  "POST /v1/sessions/:id/turns": ref("Turn"),
  "POST /v1/sessions/:id/compress": ref("Compaction"),
  "POST /v1/sessions/:id/archive": object({ session, archived: bool }),
  "POST /v1/sessions/:id/unarchive": object({ session, unarchived: bool }),
  "POST /v1/sessions/:id/end": object({ session, ended: bool }),
  "POST /v1/sessions/:id/reset": object({ session, old_session_id: str }),
  "DELETE /v1/sessions/:id": object({ deleted_ids: ids }),
  "POST /v1/maintenance/:task": {
    oneOf: [
      object({ task: str, deleted_ids: ids, fired: bool }),
      object({ task: str, would_delete_ids: ids, dry_run: { const: true } }),
      object({ task: str, archived_ids: ids }),
      object({ task: str, would_archive_ids: ids, dry_run: { const: true } }),
      object({ task: str, compactions: array(ref("Compaction")) }),
    ],
  },
  "GET /v1/hooks": object({
    hooks: array(object({ hook: choice(HOOK_NAMES), fields: array(str), returns_used: bool, schema_version: int, schema: { type: "object" } })),
  }),
  "GET /v1/plugins": object({ plugins: array(ref("Plugin")) }),
  "GET /v1/plugins/:name": object({ plugin: ref("Plugin") }),
  "GET /v1/plugins/:name/logs": object({
    plugin: str,
    logs: array(object({ seq: int, t: str, level: str, source: str, message: str })),
  }),
  "POST /v1/plugins/:name/:action": object({ plugin: ref("Plugin") }),
  "GET /v1/commands": object({
    commands: array(object({ name: str, description: str, plugin: nullable("string"), sensitive: bool, conflict: array(str) }, ["conflict"])),
  }),
  "POST /v1/commands/:name": object({ command: str, output: str }),
};
