// The remote half of sync-reader.ts: runs each posted query on its own @libsql/client and hands the
// rows back through shared memory, waking the caller blocked in Atomics.wait. Plain JavaScript, so
// the worker needs no TypeScript loader on Node or Deno.
import { parentPort, workerData } from "node:worker_threads";
import { createClient } from "@libsql/client";

const { url, authToken, ctl, data } = workerData;
const state = new Int32Array(ctl);
const out = new Uint8Array(data);
const encoder = new TextEncoder();
// Hrana over a WebSocket keeps one connection open: a point read is one frame each way, not an
// HTTP request (the same server answers both on one port).
const wsUrl = url.replace(/^http(s?):/, "ws$1:");
const client = createClient(authToken ? { url: wsUrl, authToken } : { url: wsUrl });

function reply(id, code, text) {
  let bytes = encoder.encode(text);
  if (bytes.byteLength > out.byteLength) {
    code = 2;
    bytes = encoder.encode(`result of ${bytes.byteLength} bytes exceeds ${out.byteLength}`);
  }
  out.set(bytes);
  state[1] = bytes.byteLength;
  state[2] = id;
  state[3] = code;
  // The answer counter moves last: a caller that sees it move reads a complete answer.
  Atomics.add(state, 0, 1);
  Atomics.notify(state, 0);
}

// One query at a time, in order: the shared buffer holds one answer, tagged with its request id (a
// caller that gave up on a hung query must not take its late answer for the next one's).
let chain = Promise.resolve();
parentPort.on("message", ({ id, sql, args }) => {
  chain = chain.then(async () => {
    try {
      const rs = await client.execute({ sql, args });
      reply(id, 1, JSON.stringify(rs.rows.map((r) => Array.from(r))));
    } catch (err) {
      reply(id, 2, err instanceof Error ? err.message : String(err));
    }
  });
});
