// The HTTP API (Hono, JSON, /v1): request id, access log and the refusal of plugins' own requests
// and of other sites' pages first, then the public probes and docs, then auth, body limit and idempotency, then the routes.
// A known path with a wrong method is a 405.
import { Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { methodNotAllowed } from "hono/method-not-allowed";
import type { Core } from "../core.ts";
import { adminRoutes } from "./admin.ts";
import { errorBody, methodNotAllowedResponse, onError } from "./errors.ts";
import { bearerAuth, idempotency, refusePluginRequests, sameOriginOnly } from "./guards.ts";
import { createMetrics } from "./metrics.ts";
import { accessLog, withRequestId } from "./observe.ts";
import { InFlight } from "../util/in-flight.ts";
import { within } from "../util/within.ts";
import { VERSION } from "../version.ts";
import { metricsRoute, publicOpsRoutes, type OpsOptions } from "./ops.ts";
import { sessionRoutes } from "./sessions.ts";

export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** A refused body up to this size is still read (and dropped) so that its sender gets the answer, */
const DRAINED_BODY_BYTES = 4 * MAX_BODY_BYTES;
/** within this time: a sender that trickles it is not waited for (the request would hold shutdown). */
const DRAIN_MS = 5_000;

/**
 * A response sent before the request body was read (401, 413, a refused Idempotency-Key) leaves
 * the body's bytes on the socket. Closing a socket with unread bytes makes the kernel reset it, and
 * the client, still sending, gets ECONNRESET or EPIPE instead of the answer (a 5 MB body's 413 was
 * mostly lost so). So a body up to four times the limit is read and dropped first, a chunk at a
 * time; past that reading stops, and `Connection: close` tells the client not to reuse the connection.
 */
const drainOrCloseUnreadBody: MiddlewareHandler = async (c, next) => {
  await next();
  const req = c.req.raw;
  if (req.body === null || req.bodyUsed) return;
  const declared = Number(req.headers.get("content-length") ?? 0);
  if (declared <= DRAINED_BODY_BYTES && (await drained(req.body, DRAINED_BODY_BYTES, DRAIN_MS))) return;
  c.res.headers.set("connection", "close");
};

/** Reads `body` to its end and drops it; false when it holds more than `most` bytes, takes longer than `ms`, or fails. */
async function drained(body: ReadableStream<Uint8Array>, most: number, ms: number): Promise<boolean> {
  const reader = body.getReader();
  const read = async (): Promise<boolean> => {
    let bytes = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return true;
      bytes += value.byteLength;
      if (bytes > most) return false;
    }
  };
  try {
    return await within(read().catch(() => false), ms, () => false);
  } finally {
    reader.cancel().catch(() => {});
  }
}

export function createApp(core: Core, opts: OpsOptions = {}): Hono {
  const app = new Hono();
  const metrics = createMetrics(core, VERSION);
  app.onError(onError);
  app.notFound((c) => c.json(errorBody("not_found", `no route for ${c.req.method} ${c.req.path}`), 404));
  // Counted from here to the handler's end, whatever the connection does (a shutdown waits for it).
  const work = opts.work ?? new InFlight();
  app.use("*", (_c, next) => work.track(next()));
  app.use("*", withRequestId);
  app.use("*", accessLog(metrics));
  app.use("*", refusePluginRequests);
  app.use("*", drainOrCloseUnreadBody);
  app.use("*", sameOriginOnly(!core.config.api_token));
  app.use(
    "*",
    methodNotAllowed({
      app,
      onMethodNotAllowed: methodNotAllowedResponse,
    }),
  );
  publicOpsRoutes(app, core, opts);
  app.use("*", bearerAuth(core.config.api_token));
  app.use(
    "*",
    bodyLimit({ maxSize: MAX_BODY_BYTES, onError: (c) => c.json(errorBody("body_too_large", `request body exceeds ${MAX_BODY_BYTES} bytes`), 413) }),
  );
  // A response goes out once the plugin KV writes its hooks made are committed, so any process on
  // the database (another node, the CLI) sees them at its next request (no cost when none are queued).
  app.use("/v1/*", async (_c, next) => {
    await next();
    await core.kv.flush();
  });
  app.use("/v1/*", idempotency(core, work));
  metricsRoute(app, metrics);
  app.get("/v1/health", (c) => c.json({ ok: true }));
  app.route("/v1/sessions", sessionRoutes(core, work));
  app.route("/v1", adminRoutes(core));
  return app;
}
