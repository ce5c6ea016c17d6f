// Operations endpoints: probes for load balancers and orchestrators (no token), Prometheus metrics
// (behind the token when one is set), the OpenAPI document and an offline docs page whose assets
// come from the swagger-ui-dist npm package (nothing is fetched from the internet at run time).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { sql } from "kysely";
import type { Hono } from "hono";
import type { Core } from "../core.ts";
import { noPlugins } from "../plugins/host.ts";
import type { InFlight } from "../util/in-flight.ts";
import { within } from "../util/within.ts";
import { VERSION } from "../version.ts";
import type { HttpMetrics } from "./metrics.ts";
import { openApiDocument } from "./openapi.ts";


export interface OpsOptions {
  /** True once a graceful shutdown started: /readyz answers 503 so balancers stop sending. */
  draining?: () => boolean;
  /** Where the app counts the work its requests started (the server's shutdown waits for it). */
  work?: InFlight;
}

const READY_DB_TIMEOUT_MS = 2_000;

/** Probes and docs: registered before the bearer guard, so they answer without a token. */
export function publicOpsRoutes(app: Hono, core: Core, opts: OpsOptions): void {
  app.get("/healthz", (c) => c.json({ ok: true, version: VERSION }));
  app.get("/readyz", async (c) => {
    const checks: Record<string, string> = {};
    // A database that hangs (a stopped server) must not hang the probe too.
    try {
      await within(sql`select 1`.execute(core.storage.db), READY_DB_TIMEOUT_MS, () => {
        throw new Error(`no answer within ${READY_DB_TIMEOUT_MS} ms`);
      });
      // Answering is not enough: writes that can no longer be made durable fail, every one (wal-sync.ts).
      const fault = core.storage.durabilityFault();
      checks.database = fault ? `writes fail: ${fault}` : "ok";
    } catch (err) {
      checks.database = `unreachable: ${(err as Error).message}`;
    }
    checks.plugins = core.plugins === noPlugins ? "not loaded" : "ok";
    if (opts.draining?.()) checks.server = "shutting down";
    const ready = Object.values(checks).every((s) => s === "ok");
    const plugins = core.plugins.list();
    const count = (status: string) => plugins.filter((p) => p.status === status).length;
    return c.json(
      { ready, checks, plugins: { active: count("active"), failed: count("failed"), quarantined: count("quarantined"), disabled: count("disabled") } },
      ready ? 200 : 503,
    );
  });
  const doc = openApiDocument(VERSION, core.config.api_token !== undefined && core.config.api_token !== "");
  app.get("/openapi.json", (c) => c.json(doc));
  app.get("/docs", (c) => c.html(DOCS_HTML));
  app.get("/docs/:asset", (c) => {
    const name = c.req.param("asset");
    // Own keys only: "constructor" or "toString" named an inherited member, then a missing file (500).
    if (!Object.hasOwn(DOCS_ASSETS, name)) return c.notFound();
    return c.body(docsAsset(name), 200, { "content-type": DOCS_ASSETS[name]!, "cache-control": "public, max-age=86400" });
  });
}

/** Behind the token: metrics can reveal plugin names and load. */
export function metricsRoute(app: Hono, metrics: HttpMetrics): void {
  app.get("/metrics", async (c) => c.body(await metrics.registry.metrics(), 200, { "content-type": metrics.registry.contentType }));
}

const DOCS_ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
};
const assetCache = new Map<string, string>();
function docsAsset(name: string): string {
  let text = assetCache.get(name);
  if (text === undefined) {
    const dir = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
    assetCache.set(name, (text = readFileSync(join(dir, name), "utf8")));
  }
  return text;
}

// validatorUrl: null keeps Swagger UI from calling its online validator.
const DOCS_HTML = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>hookbox API</title><link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#ui", validatorUrl: null, deepLinking: true });</script>
</body>
</html>`;
