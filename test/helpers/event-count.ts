// "Events lost": what the well-behaved WASM `counter` plugin counted (its /counts command) against
// every hook the dispatcher emitted (an in-process recorder). Both see each emit, so any difference
// is an event a plugin did not get.
import type { HookRecorder } from "./hooks.ts";
import type { TestServer } from "./server.ts";

export async function counterCounts(server: TestServer): Promise<Record<string, number>> {
  const res = await server.api("POST", "/v1/commands/counts", {});
  if (res.status !== 200) throw new Error(`/counts: ${res.status} ${JSON.stringify(res.body)}`);
  return JSON.parse(res.body.output);
}

export function emittedCounts(rec: HookRecorder): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of rec.events) out[e.hook] = (out[e.hook] ?? 0) + 1;
  return out;
}

/** Per hook, emitted minus counted; empty when the counter saw every event. */
export async function lostEvents(server: TestServer, rec: HookRecorder): Promise<{ lost: Record<string, number>; emitted: number }> {
  const counted = await counterCounts(server);
  // Only the hooks counter subscribes to (the recorder hears every hook, transforms included).
  const subscribed = new Set<string>(server.core.plugins.get("counter")?.hooks ?? []);
  const emitted = Object.fromEntries(Object.entries(emittedCounts(rec)).filter(([hook]) => subscribed.has(hook)));
  const lost: Record<string, number> = {};
  for (const hook of new Set([...Object.keys(counted), ...Object.keys(emitted)])) {
    const d = (emitted[hook] ?? 0) - (counted[hook] ?? 0);
    if (d !== 0) lost[hook] = d;
  }
  return { lost, emitted: rec.events.length };
}
