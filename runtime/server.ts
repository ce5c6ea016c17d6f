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
  const app = createApp(core);
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, hostname: opts.host, port: opts.port }, (info: AddressInfo) => {
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
