// Prometheus metrics (prom-client: the standard Node client, plain JS, runs on Deno too). One
// registry per app, so several servers in one process (tests) do not mix. HTTP metrics are
// observed per request; plugin metrics are read at scrape time from the plugin runtime's stats
// and the database (KV size), so they cost nothing between scrapes.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { PluginStats } from "../../hooks/bookkeeping.ts";
import type { Core } from "../core.ts";
import { within } from "../util/within.ts";

export interface HttpMetrics {
  registry: Registry;
  /** Records one answered request. */
  observe(method: string, route: string, status: number, seconds: number): void;
  inFlight: Gauge;
}

const runtime = "Deno" in globalThis ? "deno" : "node";
/** How long a scrape waits for the KV usage read before it answers with the last values. */
const KV_READ_MS = 1_000;

export function createMetrics(core: Core, version: string): HttpMetrics {
  const registry = new Registry();
  const registers = [registry];
  new Gauge({ name: "hookbox_build_info", help: "hookbox version and JavaScript runtime", labelNames: ["version", "runtime"], registers }).set({ version, runtime }, 1);
  const requests = new Counter({ name: "hookbox_http_requests_total", help: "HTTP requests answered, by route and status", labelNames: ["method", "route", "status"], registers });
  const latency = new Histogram({
    name: "hookbox_http_request_duration_seconds",
    help: "HTTP request latency until the response headers, by route",
    labelNames: ["method", "route"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  const inFlight = new Gauge({ name: "hookbox_http_requests_in_flight", help: "HTTP requests being answered", registers });

  // Per hook: counted as each call ends (the dispatcher's own stats are per plugin only).
  const hookCalls = new Counter({
    name: "hookbox_hook_calls_total",
    help: 'hook calls by plugin, hook and outcome ("ok" or the failure kind)',
    labelNames: ["plugin", "hook", "outcome"],
    registers,
  });
  const hookLatency = new Histogram({
    name: "hookbox_hook_call_duration_seconds",
    help: "hook call latency by plugin and hook",
    labelNames: ["plugin", "hook"],
    buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers,
  });
  core.dispatcher.onCall((e) => {
    hookCalls.inc({ plugin: e.plugin, hook: e.hook, outcome: e.failure ?? "ok" });
    hookLatency.observe({ plugin: e.plugin, hook: e.hook }, e.ms / 1000);
  });

  const stats = () => core.plugins.list();
  // Per-plugin totals kept by the dispatcher, copied at scrape time.
  const totals: Array<[name: string, help: string, read: (s: PluginStats) => number]> = [
    // The plugin's own stats: every call of it, hooks, slash commands and tools alike (the per-hook
    // family above counts hooks only).
    ["hookbox_plugin_hook_calls_total", "calls of each plugin: hooks, slash commands and tools (hookbox_hook_calls_total: hooks only)", (s) => s.calls],
    ["hookbox_plugin_hook_skipped_total", "hook calls skipped during a time-out cool-off", (s) => s.skipped_cooloff],
    ["hookbox_plugin_fuel_used_total", "fuel (metered WASM instructions) spent by each plugin", (s) => s.fuel_used],
  ];
  for (const [name, help, read] of totals) {
    new Counter({
      name,
      help,
      labelNames: ["plugin"],
      registers,
      collect() {
        this.reset();
        // Never below 0 (a counter refuses it, and the whole scrape would fail with it).
        for (const p of stats()) this.inc({ plugin: p.name }, p.stats ? Math.max(0, read(p.stats)) : 0);
      },
    });
  }
  new Counter({
    name: "hookbox_plugin_hook_failures_total",
    help: "failed calls of each plugin (hooks, slash commands and tools) by kind (trap, fuel, timeout, memory, bad_output, denied, unavailable, quota, conflict)",
    labelNames: ["plugin", "kind"],
    registers,
    collect() {
      this.reset();
      for (const p of stats()) for (const [kind, n] of Object.entries(p.stats?.failures ?? {})) this.inc({ plugin: p.name, kind }, n);
    },
  });
  new Gauge({
    name: "hookbox_plugin_hook_latency_seconds",
    help: "call latency quantiles over each plugin's last 1024 calls (hooks, slash commands and tools)",
    labelNames: ["plugin", "quantile"],
    registers,
    collect() {
      this.reset();
      for (const p of stats()) {
        if (!p.stats || p.stats.latency_ms.samples === 0) continue;
        this.set({ plugin: p.name, quantile: "0.5" }, p.stats.latency_ms.p50 / 1000);
        this.set({ plugin: p.name, quantile: "0.99" }, p.stats.latency_ms.p99 / 1000);
      }
    },
  });
  new Gauge({
    name: "hookbox_plugin_status",
    help: "1 for each plugin's current status (active, disabled, quarantined, failed)",
    labelNames: ["plugin", "status"],
    registers,
    collect() {
      this.reset();
      for (const p of stats()) this.set({ plugin: p.name, status: p.status }, 1);
    },
  });
  new Gauge({
    name: "hookbox_plugin_hook_quarantined",
    help: 'quarantined plugin hooks (hook="*": the whole plugin), 1 each',
    labelNames: ["plugin", "hook"],
    registers,
    collect() {
      this.reset();
      for (const p of stats()) {
        if (p.stats?.quarantined) this.set({ plugin: p.name, hook: "*" }, 1);
        for (const hook of Object.keys(p.stats?.quarantined_hooks ?? {})) this.set({ plugin: p.name, hook }, 1);
      }
    },
  });
  new Gauge({
    name: "hookbox_plugins_quarantined",
    help: "plugins quarantined right now",
    registers,
    collect() {
      this.set(stats().filter((p) => p.status === "quarantined").length);
    },
  });
  // Each plugin's KV as its usage row keeps it (not a scan of every key). A database that is down or
  // hanging must not take the scrape with it: past KV_READ_MS, or on an error, the gauges keep their
  // last values. One read at a time (scrapes of a hung database wait on the read under way, they do
  // not pile more onto the client), and both gauges of a scrape share one wait.
  let reading: Promise<void> | undefined;
  let waiting: Promise<void> | undefined;
  let kvRows: Array<{ plugin: string; keys: number; bytes: number }> = [];
  const waitForKvUsage = async () => {
    reading ??= core.storage.db
      .selectFrom("plugin_kv_usage")
      .select(["plugin", "keys", "bytes"])
      .execute()
      .then((rows) => void (kvRows = rows.map((r) => ({ plugin: r.plugin, keys: Number(r.keys), bytes: Number(r.bytes) }))))
      .catch(() => undefined)
      .finally(() => (reading = undefined));
    await within(reading, KV_READ_MS, () => undefined);
  };
  const readKvUsage = () => (waiting ??= waitForKvUsage().finally(() => setTimeout(() => (waiting = undefined), 0)));
  new Gauge({
    name: "hookbox_plugin_kv_keys",
    help: "KV entries stored by each plugin",
    labelNames: ["plugin"],
    registers,
    async collect() {
      await readKvUsage();
      this.reset();
      for (const r of kvRows) this.set({ plugin: r.plugin }, r.keys);
    },
  });
  new Gauge({
    name: "hookbox_plugin_kv_bytes",
    help: "bytes of KV keys and values stored by each plugin",
    labelNames: ["plugin"],
    registers,
    async collect() {
      await readKvUsage();
      this.reset();
      for (const r of kvRows) this.set({ plugin: r.plugin }, r.bytes);
    },
  });
  return {
    registry,
    inFlight,
    observe(method, route, status, seconds) {
      requests.inc({ method, route, status: String(status) });
      latency.observe({ method, route }, seconds);
    },
  };
}
