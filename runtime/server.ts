// Serves the API with @hono/node-server (Node, and Deno through its Node compatibility), and stops
// it gracefully: no new connections, in-flight requests finish (bounded by a grace period), then
// whatever is still open is dropped.
import { serve } from "@hono/node-server";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Core } from "./core.ts";
import { createApp } from "./http/app.ts";
import { InFlight } from "./util/in-flight.ts";

export interface ShutdownReport {
  /** Requests that finished during the drain. */
  drained: number;
  /** Requests still running when the grace period ran out (their connections were closed). */
  dropped: number;
  ms: number;
}

export interface RunningServer {
  url: string;
  /** Requests being answered right now (a streamed response counts until its last byte; a turn whose client went away, until its end). */
  inFlight(): number;
  /** Stops accepting, waits up to `graceMs` (default 0: drop at once) for in-flight requests. */
  close(graceMs?: number): Promise<ShutdownReport>;
  /** Cuts a running close() short: what is still in flight is dropped now (a second Ctrl-C). */
  dropNow(): void;
}

export async function startServer(core: Core, opts: { host: string; port: number }): Promise<RunningServer> {
  let draining = false; // /readyz answers 503 from the first moment of a shutdown
  const work = new InFlight();
  const server = await serveFetch(createApp(core, { draining: () => draining, work }).fetch, opts, () => work.size);
  return {
    ...server,
    close: async (graceMs) => {
      draining = true;
      const report = await server.close(graceMs);
      // A dropped request's work runs on (a turn whose client went away does): what the caller
      // closes next (plugins, database) waits for it to settle, at most DROPPED_WORK_MS. Settled, it
      // has stored its Idempotency-Key's answer or given the key back (cut off, its key was held
      // 10 minutes); a database closed under its statement aborted the process on Deno (an outside
      // soak probe).
      const until = Date.now() + DROPPED_WORK_MS;
      while (work.size > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, POLL_MS));
      return report;
    },
  };
}

/** How long a shutdown waits for the work of dropped requests to settle before it closes the rest. */
const DROPPED_WORK_MS = 3_000;

/**
 * Serves any fetch handler (the API; the bench's outside baselines) until close(). `working`: the
 * requests' work still running (app.ts counts it), which close() waits for as it waits for
 * connections: a turn whose client went away is still in flight.
 */
export function serveFetch(fetch: (req: Request) => Response | Promise<Response>, opts: { host: string; port: number }, working: () => number = () => 0): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, hostname: opts.host, port: opts.port }, (info: AddressInfo) => {
      const host = info.family === "IPv6" ? `[${info.address}]` : info.address;
      const inFlight = () => Math.max(active.size, working());
      resolve({
        url: `http://${host}:${info.port}`,
        inFlight,
        close: (graceMs = 0) => drain(server as Server, inFlight, graceMs, () => cut),
        dropNow: () => void (cut = true),
      });
    });
    // Idle keep-alive connections are kept longer than Node's 5 s default: a client (or a load
    // balancer, commonly 60 s idle) that reuses a connection the server has just closed gets
    // ECONNRESET on a request the server never saw.
    const http = server as Server;
    http.keepAliveTimeout = KEEP_ALIVE_MS;
    http.headersTimeout = Math.max(http.headersTimeout ?? 0, KEEP_ALIVE_MS + 1000);
    let cut = false;
    const active = new Set<object>();
    server.on("request", (_req, res) => {
      active.add(res);
      res.once("close", () => active.delete(res));
    });
    server.once("error", reject);
  });
}

const POLL_MS = 25;
const KEEP_ALIVE_MS = 65_000;

async function drain(server: Server, inFlight: () => number, graceMs: number, cut: () => boolean): Promise<ShutdownReport> {
  const started = Date.now();
  const before = inFlight();
  const closed = new Promise<void>((done) => server.close(() => done()));
  // Keep-alive connections stay open after their response; close each one as soon as it is idle.
  while (inFlight() > 0 && Date.now() - started < graceMs && !cut()) {
    server.closeIdleConnections?.();
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  const dropped = inFlight();
  server.closeIdleConnections?.();
  server.closeAllConnections?.();
  await closed;
  return { drained: before - dropped, dropped, ms: Date.now() - started };
}
