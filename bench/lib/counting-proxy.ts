// A TCP proxy in front of a libSQL server that counts the HTTP requests going through it: each Hrana
// pipeline request is one round trip, whoever sends it (the core's client, the KV reader's worker).
import { createConnection, createServer, type Server } from "node:net";

export interface CountingProxy {
  url: string;
  /** Requests forwarded so far. */
  readonly requests: number;
  close(): Promise<void>;
}

export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const { hostname, port } = new URL(target);
  let requests = 0;
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: hostname, port: Number(port) });
    client.on("data", (chunk: Buffer) => {
      // A request starts with its method line; a body chunk never begins with one.
      const text = chunk.toString("latin1", 0, Math.min(chunk.length, 8));
      if (/^(POST|GET) \//.test(text)) requests++;
      upstream.write(chunk);
    });
    upstream.on("data", (chunk) => client.write(chunk));
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: own } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${own}`,
    get requests() {
      return requests;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
