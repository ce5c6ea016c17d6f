// Serves the API with @hono/node-server (Node, and Deno through its Node compatibility).
import { serve } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import type { Core } from "./core.ts";
import { createApp } from "./http/app.ts";

export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

export function startServer(core: Core, opts: { host: string; port: number }): Promise<RunningServer> {
  return serveFetch(createApp(core).fetch, opts);
}

/** Serves any fetch handler (the API; the bench's outside baselines) until close(). */
export function serveFetch(fetch: (req: Request) => Response | Promise<Response>, opts: { host: string; port: number }): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, hostname: opts.host, port: opts.port }, (info: AddressInfo) => {
      const host = info.family === "IPv6" ? `[${info.address}]` : info.address;
      resolve({
        url: `http://${host}:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            // Keep-alive sockets would hold close() open.
            (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
          }),
      });
    });
    server.once("error", reject);
  });
}
