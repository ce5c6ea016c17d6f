// One JSON shape for every error: {error: {code, message, issues?}}.
import type { Context } from "hono";
import { AppError, type ErrorIssue } from "../errors.ts";
import { CommandError } from "../commands/registry.ts";
import { PluginNotFoundError } from "../plugins/host.ts";
import { log } from "../log.ts";

export function errorBody(code: string, message: string, issues?: ErrorIssue[]) {
  return { error: issues ? { code, message, issues } : { code, message } };
}

/** A known path asked with a method it does not take: 405 with the methods it does take. */
export function methodNotAllowedResponse(c: Context, methods: Iterable<string>): Response {
  const allowed = [...methods].sort().join(", ");
  return c.json(errorBody("method_not_allowed", `${c.req.method} is not allowed on ${c.req.path}; use ${allowed}`), 405, { allow: allowed });
}

const COMMAND_STATUS = { unknown_command: 404, forbidden: 403, failed: 422, plugin_unavailable: 503 } as const;

/** The status and body an error answers with (also the `error` event of a streamed turn). */
export function describeError(err: unknown, c: Context): { status: 400 | 401 | 403 | 404 | 409 | 413 | 422 | 500 | 502 | 503; body: ReturnType<typeof errorBody> } {
  if (err instanceof AppError) return { status: err.status, body: errorBody(err.code, err.message, err.issues) };
  if (err instanceof CommandError) return { status: COMMAND_STATUS[err.code], body: errorBody(err.code, err.message) };
  if (err instanceof PluginNotFoundError) return { status: 404, body: errorBody("not_found", err.message) };
  // The client hung up while its body was read (the body limit's reader, the Idempotency-Key's, a
  // handler's): ECONNRESET "aborted", which databaseFault would take for the database's.
  if (clientGone(err)) return describeError(bodyUnreadable(err), c);
  const db = databaseFault(err);
  if (db) {
    // The stack names the statement's caller: the operator (and we) can tell a read from a write.
    log("error", "database unavailable", { method: c.req.method, path: c.req.path, error: db, stack: (err as Error)?.stack?.split("\n").slice(1, 8).join("\n") });
    return { status: 503, body: errorBody("database_unavailable", `the database did not answer (${db}); nothing was changed unless the response says so: retry`) };
  }
  log("error", "request failed", { method: c.req.method, path: c.req.path, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  return { status: 500, body: errorBody("internal", "internal error") };
}

/**
 * Whether an error answer says nothing was done and to send the request again: a 5xx, or another
 * turn of the session got in first (session_busy). An Idempotency-Key is given back for those.
 */
export const asksForRetry = (status: number, code: string | undefined): boolean => status >= 500 || code === "session_busy";

export function onError(err: Error, c: Context): Response {
  const { status, body } = describeError(err, c);
  return c.json(body, status);
}

/** A request body that could not be read (400 body_unreadable): its client hung up while sending it. */
export const bodyUnreadable = (err: unknown) =>
  new AppError(400, "body_unreadable", `the request body could not be read (${String((err as Error)?.message ?? err).slice(0, 100)}): the client closed the connection?`);

/** The error of a request whose client went away while it was read. */
function clientGone(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  // Not the request's abort signal: a database failure while the client was away is still the database's.
  return e?.code === "ECONNRESET" && e.message === "aborted";
}

/** The database (a libSQL server, or the file's lock) could not be reached: its message, else undefined. */
export function databaseFault(err: unknown): string | undefined {
  const e = err as { code?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } } | null;
  const text = `${e?.code ?? ""} ${e?.message ?? ""} ${e?.cause?.code ?? ""} ${e?.cause?.message ?? ""}`;
  // A full disk (or a failing one) refuses the write whole: answered as the database's fault, to retry
  // (it was a bare 500 "internal error" while /readyz said ready; an outside probe).
  // A libSQL server that ended a transaction it judged too long (another writer waited for its lock
  // past 5 s), retried until the retries' budget ran out, is one too (it was a 500 "internal").
  return /fetch failed|ECONNREFUSED|ECONNRESET|HRANA_WEBSOCKET_ERROR|SERVER_ERROR|SQLITE_BUSY|database is locked|database read (failed|timed out|refused)|SQLITE_FULL|database or disk is full|SQLITE_IOERR|disk I\/O error|TRANSACTION_TIMEOUT|TRANSACTION_CLOSED|cannot rollback - no transaction is active|stream expired/i.test(text)
    ? String(e?.message ?? err).slice(0, 300)
    : undefined;
}
