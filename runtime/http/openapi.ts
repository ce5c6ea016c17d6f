// GET /openapi.json: the OpenAPI 3.1 description of the API, its requests generated from the SAME
// valibot schemas that validate them (@valibot/to-json-schema, the official converter; /v1/hooks uses
// it too), its success bodies from responses.ts. Each route's entry names its schemas; a test checks
// that the documented routes and the app's routes are the same set, so a new route cannot go
// undocumented.
import { toJsonSchema, type ConversionConfig } from "@valibot/to-json-schema";
import * as v from "valibot";
import { PluginName } from "../config.ts";
import { AdoptBody, BulkDeleteBody, CompressBody, CreateBody, Empty, EndBody, ListQuery, MessagesQuery, TurnBody } from "./sessions.ts";
import { CommandBody, CommandName, LogsQuery, MAINTENANCE } from "./admin.ts";
import { Id, OBJECT_AFTER_CHECK } from "./validate.ts";
import { RESPONSE_COMPONENTS, RESPONSES } from "./responses.ts";

type Json = Record<string, unknown>;

interface RouteDoc {
  summary: string;
  tag: "sessions" | "maintenance" | "plugins" | "commands" | "hooks" | "operations";
  body?: v.GenericSchema;
  query?: v.GenericSchema;
  /** Path parameters other than :id (which is always a session id). */
  params?: Record<string, v.GenericSchema>;
  /** Success status (200 unless said). */
  status?: number;
  /** Answered without the bearer token. */
  public?: boolean;
  /** Success body is not JSON. */
  produces?: string;
  /** With `Accept: text/event-stream` the success body is a stream of server-sent events (these). */
  streams?: string;
}

const CONVERT: ConversionConfig = {
  target: "draft-2020-12",
  typeMode: "input", // what a client sends (query strings before their transforms)
  errorMode: "ignore",
  // "A JSON object, then these fields" (SourceInput): document the fields.
  overrideSchema: (ctx) => {
    const inner = OBJECT_AFTER_CHECK.get(ctx.valibotSchema);
    return inner ? jsonSchema(inner) : undefined;
  },
};

function jsonSchema(schema: v.GenericSchema): Json {
  const { $schema: _drop, ...rest } = toJsonSchema(schema, CONVERT) as Json;
  return rest;
}

const Task = v.picklist(Object.keys(MAINTENANCE) as Array<keyof typeof MAINTENANCE>);

/** Every route of createApp, keyed "METHOD /hono/path". */
export const ROUTE_DOCS: Record<string, RouteDoc> = {
  "GET /healthz": { summary: "Liveness: the process answers", tag: "operations", public: true },
  "GET /readyz": { summary: "Readiness: database reachable, plugins loaded, not shutting down (503 otherwise)", tag: "operations", public: true },
  "GET /metrics": { summary: "Prometheus metrics (text format)", tag: "operations", produces: "text/plain" },
  "GET /openapi.json": { summary: "This document", tag: "operations", public: true },
  "GET /docs": { summary: "API documentation page (works offline)", tag: "operations", public: true, produces: "text/html" },
  "GET /docs/:asset": { summary: "Assets of the documentation page", tag: "operations", public: true, produces: "text/plain", params: { asset: v.string() } },
  "GET /v1/health": { summary: "Authenticated health check (kept for compatibility; probes use /healthz)", tag: "operations" },
  "POST /v1/sessions": { summary: "Create a session", tag: "sessions", body: CreateBody, status: 201 },
  "GET /v1/sessions": { summary: "List sessions (keyset paging with after=<next>)", tag: "sessions", query: ListQuery },
  "POST /v1/sessions/bulk-delete": { summary: "Delete many sessions (ids or a whole profile)", tag: "sessions", body: BulkDeleteBody },
  "POST /v1/sessions/adopt": { summary: "Move sessions (and their children) to a profile", tag: "sessions", body: AdoptBody },
  "GET /v1/sessions/:id": { summary: "Get a session", tag: "sessions" },
  "GET /v1/sessions/:id/messages": { summary: "A session's messages in order", tag: "sessions", query: MessagesQuery },
  "POST /v1/sessions/:id/turns": {
    summary: "Run a turn (or a /command)",
    tag: "sessions",
    body: TurnBody,
    streams: "events turn, injected, delta, tool_call, tool_result, then answer (the whole result, as the JSON reply) or error",
  },
  "POST /v1/sessions/:id/compress": { summary: "Compact the stored conversation", tag: "sessions", body: CompressBody },
  "POST /v1/sessions/:id/archive": { summary: "Archive a session", tag: "sessions", body: Empty },
  "POST /v1/sessions/:id/unarchive": { summary: "Unarchive a session", tag: "sessions", body: Empty },
  "POST /v1/sessions/:id/end": { summary: "End a session", tag: "sessions", body: EndBody },
  "POST /v1/sessions/:id/reset": { summary: "End a session and start a fresh one", tag: "sessions", body: Empty, status: 201 },
  "DELETE /v1/sessions/:id": { summary: "Delete a session (children and compaction chain included)", tag: "sessions" },
  "POST /v1/maintenance/:task": {
    summary: "Run a maintenance task (body depends on the task; dry_run lists what a sweep would remove)",
    tag: "maintenance",
    params: { task: Task },
    body: v.union(Object.values(MAINTENANCE)),
  },
  "GET /v1/hooks": { summary: "The hook catalogue with payload schemas", tag: "hooks" },
  "GET /v1/plugins": { summary: "Plugins with status, reason, grants and stats", tag: "plugins" },
  "GET /v1/plugins/:name": { summary: "One plugin", tag: "plugins", params: { name: PluginName } },
  "GET /v1/plugins/:name/logs": {
    summary: "A plugin's log ring: its log lines, WASI stdout/stderr and failed calls (oldest first)",
    tag: "plugins",
    params: { name: PluginName },
    query: LogsQuery,
  },
  "POST /v1/plugins/:name/:action": {
    summary: "Enable (also lifts a quarantine) or disable a plugin; enabling one that plugins.disabled lists is refused (409 disabled_by_config)",
    tag: "plugins",
    params: { name: PluginName, action: v.picklist(["enable", "disable"]) },
    body: v.strictObject({}),
  },
  "GET /v1/commands": { summary: "Slash commands (built-in and from plugins)", tag: "commands" },
  "POST /v1/commands/:name": { summary: "Run a slash command outside a turn", tag: "commands", params: { name: CommandName }, body: CommandBody },
};

const ERROR = {
  type: "object",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "string" },
        message: { type: "string" },
        issues: { type: "array", items: { type: "object", properties: { path: { type: "string" }, message: { type: "string" } } } },
      },
    },
  },
};

const openApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, "{$1}");

export function openApiDocument(version: string, tokenRequired: boolean): Json {
  const paths: Record<string, Json> = {};
  for (const [key, doc] of Object.entries(ROUTE_DOCS)) {
    const [method, path] = key.split(" ") as [string, string];
    const params: Json[] = [];
    for (const name of path.match(/:([A-Za-z_]+)/g)?.map((p) => p.slice(1)) ?? []) {
      params.push({ name, in: "path", required: true, schema: jsonSchema(doc.params?.[name] ?? Id) });
    }
    if (doc.query && "entries" in doc.query) {
      for (const [name, schema] of Object.entries((doc.query as unknown as { entries: Record<string, v.GenericSchema> }).entries)) {
        params.push({ name, in: "query", required: false, schema: jsonSchema(schema) });
      }
    }
    // Any POST or DELETE may be retried safely with an Idempotency-Key (guards.ts).
    if (method === "POST" || method === "DELETE") {
      params.push({
        name: "Idempotency-Key",
        in: "header",
        required: false,
        description: "the first answer to a key is stored; a retry with the same request gets it back and runs nothing, the same key with another request is refused (422)",
        schema: { type: "string", pattern: "^[\\x21-\\x7e]{1,200}$" },
      });
    }
    const ok = doc.produces
      ? { description: "OK", content: { [doc.produces]: { schema: { type: "string" } } } }
      : doc.streams
        ? {
            description: `OK: the JSON result; with Accept: text/event-stream, server-sent ${doc.streams}`,
            content: { "application/json": { schema: RESPONSES[key] ?? { type: "object" } }, "text/event-stream": { schema: { type: "string" } } },
          }
        : { description: "OK", content: { "application/json": { schema: RESPONSES[key] ?? { type: "object" } } } };
    const op: Json = {
      operationId: `${method.toLowerCase()}${path.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ""))}`,
      summary: doc.summary,
      tags: [doc.tag],
      parameters: params,
      responses: {
        [String(doc.status ?? 200)]: ok,
        "4XX": { description: "Bad request, unauthorized, not found, conflict...", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } },
        "5XX": {
          description: "503 database_unavailable (the database did not answer: retry), 502 provider_error (the model provider failed), 503 plugin_unavailable (the plugin a command needs is not loaded)",
          content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        },
      },
    };
    if (doc.body) op.requestBody = { required: false, content: { "application/json": { schema: jsonSchema(doc.body) } } };
    if (doc.public) op.security = [];
    (paths[openApiPath(path)] ??= {})[method.toLowerCase()] = op;
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "hookbox",
      version,
      description: "Agent core with WebAssembly plugins. Errors are {error: {code, message, issues?}}; any POST/DELETE may carry an Idempotency-Key.",
    },
    servers: [{ url: "/" }],
    security: tokenRequired ? [{ bearer: [] }] : [],
    components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } }, schemas: { Error: ERROR, ...RESPONSE_COMPONENTS } },
    paths,
  };
}
