// The HTTP bench's load generator, run in its OWN process (a client in the server's process competes
// with it for the same event loop and core). Plain JavaScript, node: imports only: starts fast on
// Node and Deno alike. Reads {concurrency, warmup, requests: [{url, body}]} as JSON on stdin; sends
// the first `warmup` requests untimed (a fresh process's client is cold), then the rest
// POST (JSON) with `concurrency` requests in flight, checks every status is 2xx and prints one JSON
// line: {n, wall_ms, mean_ms, p50_ms, p99_ms, failed, first_error}.
// node:http with keep-alive sockets, not fetch: Node's fetch (undici) capped a bare Hono server at
// ~1,600 req/s on the 2-core machine, under the floors it was meant to measure (node:http: ~4,200
// under Node, ~7,000 under Deno; see bench/lib/load.ts for which runtime runs it).
import { Buffer } from "node:buffer";
import http from "node:http";
import process from "node:process";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const spec = JSON.parse(input);
const agent = new http.Agent({ keepAlive: true, maxSockets: spec.concurrency });

/** POSTs `body` as JSON; resolves with the status and the whole answer. */
function post(url, body) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const data = Buffer.from(JSON.stringify(body));
    const headers = { "content-type": "application/json", "content-length": data.length };
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: "POST", agent, headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(data);
  });
}
const warm = spec.requests.slice(0, spec.warmup ?? 0);
const reqs = spec.requests.slice(warm.length);
const lat = new Array(reqs.length);
let next = 0;
let failed = 0;
let firstError = null;

async function worker(list) {
  for (;;) {
    const i = next++;
    if (i >= list.length) return;
    const r = list[i];
    const t0 = performance.now();
    try {
      const res = await post(r.url, r.body);
      if (res.status < 200 || res.status > 299) {
        failed++;
        firstError ??= `${res.status} ${res.text.slice(0, 200)}`;
      }
    } catch (err) {
      failed++;
      firstError ??= String(err);
    }
    lat[i] = performance.now() - t0;
  }
}

await Promise.all(Array.from({ length: spec.concurrency }, () => worker(warm)));
next = 0;
failed = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: spec.concurrency }, () => worker(reqs)));
const wall = performance.now() - t0;
const sorted = [...lat].sort((a, b) => a - b);
const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
console.log(
  JSON.stringify({
    n: reqs.length,
    wall_ms: wall,
    mean_ms: lat.reduce((a, b) => a + b, 0) / lat.length,
    p50_ms: at(0.5),
    p99_ms: at(0.99),
    failed,
    first_error: firstError,
  }),
);
process.exit(0);
