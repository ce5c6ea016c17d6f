// One JSON shape for every error: {error: {code, message, issues?}}.
import type { Context } from "hono";
import { AppError, type ErrorIssue } from "../errors.ts";
import { CommandError } from "../commands/registry.ts";
import { PluginNotFoundError } from "../plugins/host.ts";
import { log } from "../log.ts";

export function errorBody(code: string, message: string, issues?: ErrorIssue[]) {
  return { error: issues ? { code, message, issues } : { code, message } };
}

const COMMAND_STATUS = { unknown_command: 404, forbidden: 403, failed: 422 } as const;

/** The status and body an error answers with (also the `error` event of a streamed turn). */
export function describeError(err: unknown, c: Context): { status: 400 | 401 | 403 | 404 | 409 | 413 | 422 | 500 | 502 | 503; body: ReturnType<typeof errorBody> } {
  if (err instanceof AppError) return { status: err.status, body: errorBody(err.code, err.message, err.issues) };
  if (err instanceof CommandError) return { status: COMMAND_STATUS[err.code], body: errorBody(err.code, err.message) };
  if (err instanceof PluginNotFoundError) return { status: 404, body: errorBody("not_found", err.message) };
  log("error", "request failed", { method: c.req.method, path: c.req.path, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  return { status: 500, body: errorBody("internal", "internal error") };
}

export function onError(err: Error, c: Context): Response {
  const { status, body } = describeError(err, c);
  return c.json(body, status);
}
