// Every request gets an id (hono/request-id: the client's X-Request-Id when sane, else a UUID;
// echoed in the response), one structured access-log line and its HTTP metrics.
import type { MiddlewareHandler } from "hono";
import { requestId } from "hono/request-id";
import { matchedRoutes } from "hono/route";
import { log } from "../log.ts";
import type { HttpMetrics } from "./metrics.ts";

export const withRequestId = requestId();

/**
 * The route pattern the request was for ("/v1/sessions/:id/turns"), never the raw path (unbounded
 * labels); also when a guard answered first (401, 413). "(unmatched)" when no route matched.
 */
function routeOf(c: Parameters<MiddlewareHandler>[0]): string {
  const handlers = matchedRoutes(c).filter((r) => r.method !== "ALL");
  return handlers.at(-1)?.path ?? "(unmatched)";
}

export function accessLog(metrics: HttpMetrics): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    metrics.inFlight.inc();
    try {
      await next();
    } finally {
      metrics.inFlight.dec();
      const ms = performance.now() - started;
      const route = routeOf(c);
      const status = c.res.status;
      metrics.observe(c.req.method, route, status, ms / 1000);
      log(status >= 500 ? "error" : "info", "request", {
        request_id: c.get("requestId"),
        method: c.req.method,
        path: c.req.path,
        route,
        status,
        ms: Math.round(ms * 10) / 10,
      });
    }
  };
}
