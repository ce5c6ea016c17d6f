// A TCP proxy in front of a libSQL server that counts the HTTP requests going through it: each Hrana
// pipeline request is one round trip, whoever sends it (the core's client, the KV reader's worker).
// It runs in a worker thread: the KV reader blocks the main thread while it waits for sqld, so a
// proxy on the main thread's event loop could never forward that read.
import { Worker } from "node:worker_threads";

export interface CountingProxy {
  url: string;
  /** Requests forwarded so far. */
  readonly requests: number;
  close(): Promise<void>;
}

const WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const { createConnection, createServer } = require("node:net");
const count = new Int32Array(workerData.count);
const server = createServer((client) => {
  const upstream = createConnection({ host: workerData.host, port: workerData.port });
  client.on("data", (chunk) => {
    // A request starts with its method line; a body chunk never begins with one.
    if (/^(POST|GET) \\//.test(chunk.toString("latin1", 0, Math.min(chunk.length, 8)))) Atomics.add(count, 0, 1);
    upstream.write(chunk);
  });
  upstream.on("data", (chunk) => client.write(chunk));
  client.on("close", () => upstream.destroy());
  upstream.on("close", () => client.destroy());
  client.on("error", () => upstream.destroy());
  upstream.on("error", () => client.destroy());
});
server.listen(0, "127.0.0.1", () => parentPort.postMessage(server.address().port));
`;

export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const { hostname, port } = new URL(target);
  const count = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(WORKER, { eval: true, workerData: { host: hostname, port: Number(port), count: count.buffer } });
  const own = await new Promise<number>((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
  });
  return {
    url: `http://127.0.0.1:${own}`,
    get requests() {
      return Atomics.load(count, 0);
    },
    close: async () => void (await worker.terminate()),
  };
}
