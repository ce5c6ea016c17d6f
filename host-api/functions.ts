// The host functions one plugin sees (import module "extism:host/user"), bound to its grants, its
// KV namespace and the core's storage. Every function exists for every plugin so that imports
// always resolve; calling one without its grant fails the call with "denied".
import type { CallContext } from "@extism/extism";
import * as v from "valibot";
import { PluginCallError } from "../hooks/failures.ts";
import type { HookLogger, LogLevel } from "../hooks/logger.ts";
import type { HostBinding, HostFunction, PluginLogSource } from "./binding.ts";
import { deny, type Grants } from "./capabilities.ts";
import { KV_LIMITS, type PluginKv } from "./kv.ts";
import { readText, readTextHead, storeText } from "./memory.ts";
import { fetchLimited, HttpRequest } from "./http-fetch.ts";
import { refusal, type ReservedEndpoint } from "./reserved-endpoints.ts";
import { readSessionIds } from "./session-ids.ts";

export const HOST_FUNCTION_NAMES = [
  "hookbox_log",
  "hookbox_kv_get",
  "hookbox_kv_set",
  "hookbox_kv_delete",
  "hookbox_kv_list",
  "hookbox_kv_delete_sessions",
  "hookbox_kv_incr",
  "hookbox_kv_cas",
  "hookbox_session_messages",
  "hookbox_http",
] as const;

/** The host functions whose answer is a block they made (see HostBinding.blockAnswers). */
const BLOCK_ANSWERS: ReadonlySet<string> = new Set(["hookbox_kv_get", "hookbox_kv_list", "hookbox_session_messages", "hookbox_http"]);

const LEVELS: LogLevel[] = ["debug", "info", "warn", "error"];
const MAX_LOG_CHARS = 2000;
const MAX_MESSAGES = 1000;
/** A request's JSON (URL, headers, body): read whole, so bounded before it is decoded. */
const MAX_HTTP_REQUEST_BYTES = 1024 * 1024 + 64 * 1024;
const MAX_SESSION_ID_BYTES = 256;
/**
 * The most one answer built on the host's thread (a key list, messages) may hold, whatever the
 * plugin's memory (a manifest may ask for 64 MiB): 51 MB of keys held the thread for 2.7 s.
 */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
const encoder = new TextEncoder();
const ANSWER_CAP_TEXT = `the most one answer may hold (the plugin's memory allowance, at most ${MAX_ANSWER_BYTES})`;

// A block's size is checked before it is decoded (readText): the KV limits bound every argument.
// Scope offset 0 is the plugin-wide scope (""), which then needs no block: two kernel calls (alloc,
// free) and an allocation fewer per KV call for the most common scope.
const scopeOf = (ctx: CallContext, o: bigint) => (o === 0n ? "" : readText(ctx, o, "kv session", KV_LIMITS.scopeBytes));
const keyOf = (ctx: CallContext, o: bigint) => readText(ctx, o, "kv key", KV_LIMITS.keyBytes);
const prefixOf = (ctx: CallContext, o: bigint) => readText(ctx, o, "kv prefix", KV_LIMITS.keyBytes);
const valueOf = (ctx: CallContext, o: bigint, what: string) => readText(ctx, o, what, KV_LIMITS.valueBytes);
export { MAX_SWEEP_IDS, MAX_SWEEP_IDS_BYTES } from "./session-ids.ts";

export interface HostContext {
  plugin: string;
  grants: Grants;
  kv: PluginKv;
  /**
   * sessions:read: the last `limit` messages of a session, oldest first (a synchronous read);
   * undefined when their JSON (the answer) would hold more than `maxBytes`.
   */
  readMessages(sessionId: string, limit: number, maxBytes: number): Array<{ role: string; content: string }> | undefined;
  /** The most a host function may answer in one call (the plugin's memory allowance), bytes. */
  maxAnswerBytes?: number;
  /** Endpoints hookbox_http refuses whatever the grants (reserved-endpoints.ts: the database server). */
  reservedEndpoints?: readonly ReservedEndpoint[];
  /** The server log. */
  log: HookLogger;
  /** The plugin's own log ring (GET /v1/plugins/:name/logs); its lines also go to the server log. */
  logs?: { push(level: LogLevel, source: PluginLogSource, message: string): void };
}

export function bindHostApi(h: HostContext): HostBinding {
  const { plugin, grants, kv } = h;
  const answerCap = Math.min(h.maxAnswerBytes ?? Infinity, MAX_ANSWER_BYTES);
  let deadline = Infinity; // the current call's: bounds HTTP requests
  const pluginLog = (level: LogLevel, source: PluginLogSource, message: string) => {
    const text = message.slice(0, MAX_LOG_CHARS);
    h.logs?.push(level, source, text);
    h.log(level, "plugin log", { plugin, ...(source === "log" ? {} : { stream: source }), message: text });
  };
  const needKv = (fn: string) => {
    if (!grants.kv) deny(plugin, fn, "kv", grants.requested);
  };
  const functions: Record<(typeof HOST_FUNCTION_NAMES)[number], HostFunction> = {
    hookbox_log(ctx: CallContext, level: number, msg: bigint) {
      pluginLog(LEVELS[level] ?? "info", "log", readTextHead(ctx, msg, "hookbox_log", MAX_LOG_CHARS * 4));
    },
    hookbox_kv_get(ctx: CallContext, session: bigint, key: bigint) {
      needKv("hookbox_kv_get");
      return storeText(ctx, kv.get(scopeOf(ctx, session), keyOf(ctx, key)));
    },
    hookbox_kv_set(ctx: CallContext, session: bigint, key: bigint, value: bigint) {
      needKv("hookbox_kv_set");
      kv.set(scopeOf(ctx, session), keyOf(ctx, key), valueOf(ctx, value, "kv value"));
    },
    hookbox_kv_delete(ctx: CallContext, session: bigint, key: bigint) {
      needKv("hookbox_kv_delete");
      kv.delete(scopeOf(ctx, session), keyOf(ctx, key));
    },
    // Bulk clean-up in one call: the keys of the sessions in `ids` (a JSON array, e.g. the raw
    // deleted_ids of on_session_delete). Mode bit 0: the keys are prefix + id + ":" + anything (else
    // prefix + id); bit 1: not counted (returns -1: the plugin does not need the number, and
    // counting costs a read of every key).
    hookbox_kv_delete_sessions(ctx: CallContext, session: bigint, prefix: bigint, ids: bigint, mode: bigint) {
      needKv("hookbox_kv_delete_sessions");
      if (mode < 0n || mode > 3n) throw new PluginCallError("trap", `hookbox_kv_delete_sessions: unknown mode ${mode} (0-3: bit 0 key per id prefix, bit 1 uncounted)`);
      const { json, list } = readSessionIds(ctx, ids);
      const n = kv.deleteForSessions(scopeOf(ctx, session), prefixOf(ctx, prefix), json, list, (mode & 1n) === 1n, (mode & 2n) === 0n);
      return BigInt(n);
    },
    // Atomic across processes: returns the new value; the call fails as `conflict` (and is run
    // again by the runtime) when another writer changed the key before this call committed.
    hookbox_kv_incr(ctx: CallContext, session: bigint, key: bigint, delta: bigint) {
      needKv("hookbox_kv_incr");
      return BigInt(kv.incr(scopeOf(ctx, session), keyOf(ctx, key), Number(delta)));
    },
    // Compare-and-set: `expected` or `next` 0 means absent (next absent deletes). Returns 1 when
    // the key held `expected` and now holds `next`, 0 when it held something else (nothing written).
    hookbox_kv_cas(ctx: CallContext, session: bigint, key: bigint, expected: bigint, next: bigint) {
      needKv("hookbox_kv_cas");
      const want = expected === 0n ? undefined : valueOf(ctx, expected, "kv expected");
      const value = next === 0n ? undefined : valueOf(ctx, next, "kv value");
      return kv.cas(scopeOf(ctx, session), keyOf(ctx, key), want, value) ? 1n : 0n;
    },
    hookbox_kv_list(ctx: CallContext, session: bigint, prefix: bigint) {
      needKv("hookbox_kv_list");
      return ctx.store(JSON.stringify(kv.list(scopeOf(ctx, session), prefixOf(ctx, prefix), answerCap)));
    },
    hookbox_session_messages(ctx: CallContext, session: bigint, limit: bigint) {
      if (!grants.sessionsRead) deny(plugin, "hookbox_session_messages", "sessions:read", grants.requested);
      const id = readText(ctx, session, "session id", MAX_SESSION_ID_BYTES);
      const n = limit <= 0n ? 100 : Math.min(Number(limit), MAX_MESSAGES);
      // Checked before the contents are read: reading and encoding hundreds of MB would hold the
      // thread for seconds.
      const messages = h.readMessages(id, n, answerCap);
      if (!messages) throw new PluginCallError("memory", `the last ${n} messages of ${id} hold more than ${answerCap} bytes (as JSON), ${ANSWER_CAP_TEXT}`);
      return ctx.store(JSON.stringify(messages));
    },
    hookbox_http(ctx: CallContext, request: bigint) {
      const raw = readText(ctx, request, "http request", MAX_HTTP_REQUEST_BYTES);
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        throw new PluginCallError("trap", "hookbox_http: request is not JSON");
      }
      const req = v.safeParse(HttpRequest, parsed);
      if (!req.success) throw new PluginCallError("trap", `hookbox_http: bad request: ${req.issues[0].message}`);
      const url = new URL(req.output.url);
      if ((url.protocol !== "http:" && url.protocol !== "https:") || !grants.allowsHttp(url)) {
        // A URL with a port is allowed by "http:host:port" or by "http:host" (any port).
        deny(plugin, "hookbox_http", url.host === url.hostname ? `http:${url.hostname}` : [`http:${url.host}`, `http:${url.hostname}`], grants.requested);
      }
      const fetched = async () => {
        for (const endpoint of h.reservedEndpoints ?? []) {
          const why = await refusal(url, endpoint);
          if (why) throw new PluginCallError("denied", `hookbox_http: ${why}`);
        }
        // The body is bounded (MAX_HTTP_RESPONSE_BYTES), its JSON up to six times that (control
        // characters escaped): the answer is held to the cap as every other one (an outside probe).
        const answer = encoder.encode(JSON.stringify(await fetchLimited(req.output, plugin, deadline)));
        if (answer.length > answerCap) throw new PluginCallError("memory", `hookbox_http: the response's JSON holds ${answer.length} bytes, more than ${ANSWER_CAP_TEXT}`);
        return ctx.store(answer);
      };
      return fetched();
    },
  };
  return {
    functions,
    asyncFunctions: new Set(grants.needsAsyncHost ? ["hookbox_http"] : []),
    blockAnswers: BLOCK_ANSWERS,
    begin: (d) => {
      deadline = d;
      kv.begin();
    },
    end: (ok) => kv.end(ok),
    log: pluginLog,
  };
}
