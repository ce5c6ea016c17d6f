import { openBenchCore } from "./lib/core.ts";
import { seedTrees } from "./lib/seed.ts";
import { DELETE_FLEET } from "./suites/bulk-delete.ts";
const bc = await openBenchCore({ fleet: DELETE_FLEET });
for (const size of [10000, 10000]) {
  const roots = await seedTrees(bc.core, size);
  const t0 = performance.now();
  const orig = bc.core.dispatcher.emit.bind(bc.core.dispatcher);
  let te = 0;
  (bc.core.dispatcher as any).emit = async (h: any, f: any) => { const a = performance.now(); const r = await orig(h, f); te = performance.now() - a; return r; };
  await bc.core.deletion.remove({ reason: "delete", ids: roots });
  const t1 = performance.now();
  await (bc.core.plugins as any).flush();
  console.log(size, "remove", (t1 - t0).toFixed(1), "emit", te.toFixed(1), "flush", (performance.now() - t1).toFixed(1));
  for (const p of bc.core.plugins.list()) console.log(" ", p.name, p.stats?.latency_ms.p99, p.stats?.fuel_used, p.stats?.last_error);
}
await bc.close();
