// The HTTP API (Hono, JSON, /v1): auth, body limit and idempotency first, then the routes.
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Core } from "../core.ts";
import { adminRoutes } from "./admin.ts";
import { errorBody, onError } from "./errors.ts";
import { bearerAuth, idempotency } from "./guards.ts";
import { sessionRoutes } from "./sessions.ts";

export const MAX_BODY_BYTES = 4 * 1024 * 1024;

export function createApp(core: Core): Hono {
  const app = new Hono();
  app.onError(onError);
  app.notFound((c) => c.json(errorBody("not_found", `no route for ${c.req.method} ${c.req.path}`), 404));
  app.use("*", bearerAuth(core.config.api_token));
  app.use(
    "*",
    bodyLimit({ maxSize: MAX_BODY_BYTES, onError: (c) => c.json(errorBody("body_too_large", `request body exceeds ${MAX_BODY_BYTES} bytes`), 413) }),
  );
  app.use("/v1/*", idempotency(core));
  app.get("/v1/health", (c) => c.json({ ok: true }));
  app.route("/v1/sessions", sessionRoutes(core));
  app.route("/v1", adminRoutes(core));
  return app;
}
