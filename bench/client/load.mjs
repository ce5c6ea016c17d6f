// The HTTP bench's load generator, run in its OWN process (a client in the server's process competes
// with it for the same event loop and core). Plain JavaScript with no imports: starts fast on Node
// and Deno alike. Reads {concurrency, warmup, requests: [{url, body}]} as JSON on stdin; sends the
// first `warmup` requests untimed (a fresh process's fetch is cold), then the rest
// POST (JSON) with `concurrency` requests in flight, checks every status is 2xx and prints one JSON
// line: {n, wall_ms, mean_ms, p50_ms, p99_ms, failed, first_error}.
import process from "node:process";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const spec = JSON.parse(input);
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
      const res = await fetch(r.url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(r.body) });
      const text = await res.text();
      if (res.status < 200 || res.status > 299) {
        failed++;
        firstError ??= `${res.status} ${text.slice(0, 200)}`;
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
