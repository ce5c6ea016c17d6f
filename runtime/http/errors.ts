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

export function onError(err: Error, c: Context): Response {
  if (err instanceof AppError) return c.json(errorBody(err.code, err.message, err.issues), err.status);
  if (err instanceof CommandError) return c.json(errorBody(err.code, err.message), COMMAND_STATUS[err.code]);
  if (err instanceof PluginNotFoundError) return c.json(errorBody("not_found", err.message), 404);
  log("error", "request failed", { method: c.req.method, path: c.req.path, error: err.stack ?? String(err) });
  return c.json(errorBody("internal", "internal error"), 500);
}
