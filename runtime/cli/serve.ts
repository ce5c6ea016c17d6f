// `hookbox serve`: the HTTP API until SIGTERM/SIGINT/SIGHUP, then a graceful stop: no new connections,
// in-flight requests (and the hook calls they make) finish within shutdown_grace_seconds, plugin
// state is flushed and the plugins closed, the database closed, each step logged.
import type { Command } from "commander";
import { checkBindHost, type Config } from "../config.ts";
import { log } from "../log.ts";
import { startServer } from "../server.ts";
import { STATE_SYNC_MS, type PluginManager } from "../plugins/manager.ts";
import { watchPlugins, type PluginWatcher } from "../plugins/watch.ts";
import { positiveNumber, wholeNumber, type CliContext } from "./context.ts";

/** The signals that drain and stop the server. */
const SHUTDOWN_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

export function registerServe(program: Command, ctx: CliContext): void {
  program
    .command("serve")
    .description("serve the HTTP API (SIGTERM, SIGINT or SIGHUP drains in-flight requests, then stops)")
    .option("--host <host>", "bind address (beyond loopback needs HOOKBOX_API_TOKEN)")
    .option("--port <port>", "port (0: any free port)", wholeNumber(0, 65_535))
    .option("--grace-seconds <n>", "shutdown_grace_seconds for this run", positiveNumber(true))
    .option("--watch", "reload a plugin when its manifest.json or plugin.wasm changes (or its build fails); pick up new plugin folders")
    .action(async (o: { host?: string; port?: number; graceSeconds?: number; watch?: boolean }) => {
      const base = ctx.config();
      const config: Config = {
        ...base,
        host: o.host ?? base.host,
        port: o.port ?? base.port,
        shutdown_grace_seconds: o.graceSeconds ?? base.shutdown_grace_seconds,
      };
      checkBindHost(config); // --host must not bypass the config's loopback-without-token rule
      await serveUntilSignal(config, ctx, o.watch === true);
    });
}

async function serveUntilSignal(config: Config, ctx: CliContext, watch: boolean): Promise<void> {
  const core = await ctx.core(config);
  const server = await startServer(core, { host: config.host, port: config.port });
  ctx.io.out(`hookbox listening on ${server.url} (db ${config.db_url}, ${core.plugins.list().length} plugins)`);
  let watcher: PluginWatcher | undefined;
  if (watch) {
    const plugins = core.plugins as PluginManager;
    watcher = watchPlugins(config.plugins.dir, async (name) => {
      const info = await plugins.refresh(name);
      ctx.io.out(info ? `plugin ${name}: ${info.status}${info.reason ? ` (${info.reason})` : ""}` : `plugin ${name}: removed`);
    });
  }
  // An operator's enable/disable (or a quarantine) made through another node or the CLI: applied
  // here too within STATE_SYNC_MS. A database that cannot answer is said once, not every time.
  let syncing: Promise<void> | undefined;
  let syncFailing = false;
  const stateTimer = setInterval(() => {
    syncing ??= (core.plugins as PluginManager)
      .syncState()
      .then(
        () => void (syncFailing = false),
        (e: unknown) => {
          if (!syncFailing) log("warn", "could not read plugin state changes of other processes; trying again", { error: String(e) });
          syncFailing = true;
        },
      )
      .finally(() => (syncing = undefined));
  }, STATE_SYNC_MS);
  stateTimer.unref();
  // Hourly silent maintenance: the KV of sessions whose deleting process died before its purge
  // (10 minutes' grace for a purge still under way elsewhere), and idle auto-archive when configured.
  let sweeping: Promise<unknown> = core.kv.sweep(600_000).catch((e) => log("warn", "plugin kv sweep failed", { error: String(e) }));
  const timer = setInterval(() => {
    sweeping = Promise.all([
      core.kv.sweep(600_000).catch((e) => log("warn", "plugin kv sweep failed", { error: String(e) })),
      config.retention.idle_archive_after_days > 0 ? core.maintenance.idleArchive().catch((e) => log("warn", "idle archive failed", { error: String(e) })) : undefined,
    ]);
  }, 3_600_000);
  timer.unref();
  // SIGHUP too: the terminal that ran `npm start` closed (it stopped the server undrained).
  const signal = await new Promise<string>((done) => {
    for (const s of SHUTDOWN_SIGNALS) process.once(s, () => done(s));
  });
  const graceMs = config.shutdown_grace_seconds * 1000;
  log("info", "shutting down: no new connections, draining in-flight requests", { signal, in_flight: server.inFlight(), grace_ms: graceMs });
  // A second signal (Ctrl-C again) does not wait out the grace period. One arriving within a second
  // of the first is the same Ctrl-C passed on by a wrapper (npm forwards the terminal's SIGINT that
  // the whole process group already got): ignored.
  const first = Date.now();
  const impatient = (again: string) => {
    if (Date.now() - first < 1_000) return void process.once(again, () => impatient(again));
    log("warn", "second signal: dropping in-flight requests now", { signal: again, in_flight: server.inFlight() });
    server.dropNow();
  };
  for (const s of SHUTDOWN_SIGNALS) process.once(s, () => impatient(s));
  clearInterval(timer);
  clearInterval(stateTimer);
  watcher?.close();
  const report = await server.close(graceMs);
  log(report.dropped ? "warn" : "info", "http server stopped", { ...report });
  await sweeping;
  // A sync under way is not waited for (a database that hangs would hold the shutdown): the plugins'
  // close stops it from starting anything more.
  const t = Date.now();
  await core.close(); // flushes plugin KV, closes every plugin instance, then the database
  log("info", "hookbox stopped", { signal, plugins_and_db_ms: Date.now() - t });
}
