// The WASM plugin runtime behind PluginHost: loads plugins from config.plugins.dir, decides which
// are enabled (config, operator overrides and quarantine persisted in plugin_state), subscribes them
// to the dispatcher, registers their commands, and persists quarantines. A plugin that fails to load
// is listed as "failed" with its reason; the others run.
import type { Kysely } from "kysely";
import { HOOK_NAMES } from "../../hooks/catalogue.ts";
import type { CallResult, HookSubscriber } from "../../hooks/dispatcher.ts";
import { PluginCallError } from "../../hooks/failures.ts";
import { readHookOutput } from "../../hooks/results.ts";
import { grantedOf, type Grants } from "../../host-api/capabilities.ts";
import type { PluginKv } from "../../host-api/kv.ts";
import { CommandError, type CommandCall } from "../commands/registry.ts";
import type { Core } from "../core.ts";
import { log } from "../log.ts";
import type { Database } from "../storage/schema.ts";
import { WasmPlugin, type SandboxLimits } from "../sandbox/wasm-plugin.ts";
import { PluginNotFoundError, type PluginHost, type PluginInfo, type PluginStatus } from "./host.ts";
import { effectiveLimits } from "./limits.ts";
import { readManifest, scanPluginDir } from "./loader.ts";
import { createPluginInstance } from "./instance.ts";
import type { Manifest } from "./manifest.ts";
import { commandOutput } from "./command-output.ts";
import { pluginTools, sectionOf } from "./plugin-api.ts";
import { PluginLogs, type PluginLogEntry } from "./logs.ts";
import { suggest } from "../util/suggest.ts";

interface Entry {
  name: string;
  path: string;
  manifest: Manifest | undefined;
  grants: Grants;
  limits: SandboxLimits | undefined;
  /** Load error: the plugin is "failed". */
  error: string | null;
  /** Operator override from plugin_state: true/false, or null for "as configured". */
  override: boolean | null;
  sandbox: WasmPlugin | undefined;
  kv: PluginKv | undefined;
}

/**
 * A call whose guarded KV writes (kv_incr, kv_cas) lost a race is run again, up to this many times
 * and within its deadline, after a random pause that grows with each try (so racing processes part).
 */
const CONFLICT_ATTEMPTS = 30;

export async function startPluginHost(core: Core): Promise<PluginManager> {
  const manager = new PluginManager(core);
  await manager.start();
  return manager;
}

export class PluginManager implements PluginHost {
  private readonly entries = new Map<string, Entry>();
  private readonly db: Kysely<Database>;
  private readonly logRings: PluginLogs;

  constructor(private readonly core: Core) {
    this.db = core.storage.db;
    this.logRings = new PluginLogs(core.now);
  }

  async start(): Promise<void> {
    const { config, dispatcher } = this.core;
    const state = new Map((await this.db.selectFrom("plugin_state").selectAll().execute()).map((r) => [r.name, r]));
    for (const { folder, path } of scanPluginDir(config.plugins.dir)) {
      const entry = this.newEntry(folder, path);
      const row = state.get(folder);
      if (row?.enabled != null) entry.override = row.enabled === 1;
      if (row?.quarantined) dispatcher.quarantine(folder, row.quarantined);
      this.reload(entry);
    }
    dispatcher.setQuarantineListener((name, reason) => void this.persistQuarantine(name, reason));
    // A plugin whose manifest failed keeps that reason (activating it would replace it with a TypeError).
    for (const entry of this.entries.values()) if (entry.error === null && this.wanted(entry)) await this.activate(entry);
    const active = this.list().filter((p) => p.status === "active").map((p) => p.name);
    log("info", "plugins loaded", { dir: config.plugins.dir, active, total: this.entries.size });
  }

  private newEntry(name: string, path: string): Entry {
    const entry: Entry = {
      name,
      path,
      manifest: undefined,
      grants: grantedOf([], []),
      limits: undefined,
      error: null,
      override: null,
      sandbox: undefined,
      kv: undefined,
    };
    this.entries.set(name, entry);
    return entry;
  }

  /**
   * Re-reads one plugin folder of plugins.dir after a change (`serve --watch`): a new folder is
   * added, a vanished one removed, a changed one stopped, reloaded from its files and started again
   * when wanted. A reload that fails leaves the plugin "failed" with the reason: the previous
   * instance is never kept running in its place.
   */
  async refresh(name: string): Promise<PluginInfo | undefined> {
    const found = scanPluginDir(this.core.config.plugins.dir).find((p) => p.folder === name);
    let e = this.entries.get(name);
    if (e) await this.deactivate(e);
    if (!found) {
      this.entries.delete(name);
      log("info", "plugin removed", { plugin: name });
      return undefined;
    }
    e ??= this.newEntry(name, found.path);
    this.reload(e);
    if (e.error === null && this.wanted(e)) await this.activate(e);
    const info = this.info(e);
    if (info.status === "failed") this.logRings.of(name).push("error", "failure", `reload failed: ${info.reason}`);
    else this.logRings.of(name).push("info", "log", `reloaded (${info.status})`);
    log(info.status === "failed" ? "error" : "info", "plugin reloaded", { plugin: name, status: info.status, reason: info.reason });
    return info;
  }

  logs(name: string, since?: number, limit?: number): PluginLogEntry[] | undefined {
    return this.entries.has(name) ? this.logRings.of(name).list(since, limit) : undefined;
  }

  /**
   * One call of export `fn` with `input` outside the dispatcher (`hookbox plugins call`): the real
   * sandbox, limits and host API; counted in the plugin's stats like a command.
   */
  async invoke(name: string, fn: string, input: string): Promise<{ output: string | undefined; fuel: number; ms: number }> {
    const e = this.entry(name);
    if (!e.sandbox) throw new PluginCallError("unavailable", `plugin ${name} is not active: ${this.info(e).reason ?? "not loaded"}`);
    const t0 = performance.now();
    try {
      const r = await callRetrying(e.sandbox, fn, input, Date.now() + e.limits!.timeoutMs);
      const ms = performance.now() - t0;
      this.core.dispatcher.recordExternalCall(name, ms, undefined, r.fuel);
      return { output: r.output, fuel: r.fuel, ms };
    } catch (err) {
      const failure = this.callFailed(e.name, fn, err);
      this.core.dispatcher.recordExternalCall(name, performance.now() - t0, failure);
      throw failure;
    }
  }

  /** A failed call, as a PluginCallError, also recorded in the plugin's log ring. */
  private callFailed(plugin: string, fn: string, err: unknown): PluginCallError {
    const failure = err instanceof PluginCallError ? err : new PluginCallError("trap", String(err));
    this.logRings.of(plugin).push("error", "failure", `${fn} failed (${failure.kind}): ${failure.message}`);
    return failure;
  }

  list(): PluginInfo[] {
    return [...this.entries.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((e) => this.info(e));
  }

  get(name: string): PluginInfo | undefined {
    const e = this.entries.get(name);
    return e && this.info(e);
  }

  async enable(name: string): Promise<PluginInfo> {
    const e = this.entry(name);
    await this.saveState(name, { enabled: 1, quarantined: null });
    e.override = true;
    this.core.dispatcher.release(name);
    if (e.error !== null) this.reload(e); // the operator may have fixed the files
    if (e.error === null && this.wanted(e) && !e.sandbox) await this.activate(e);
    return this.info(e);
  }

  async disable(name: string): Promise<PluginInfo> {
    const e = this.entry(name);
    await this.saveState(name, { enabled: 0 });
    e.override = false;
    await this.deactivate(e);
    return this.info(e);
  }

  /** Waits until every KV write made so far is in libSQL. */
  async flush(): Promise<void> {
    await this.core.kv.flush();
  }

  async close(): Promise<void> {
    this.core.dispatcher.setQuarantineListener(undefined);
    for (const e of this.entries.values()) await this.deactivate(e);
  }

  private reload(e: Entry): void {
    const { config } = this.core;
    e.error = null;
    try {
      e.manifest = readManifest(e.path, e.name);
      e.grants = grantedOf(e.manifest.capabilities, config.plugins.grants[e.name]);
      e.limits = effectiveLimits(e.name, e.manifest.limits, config);
    } catch (err) {
      this.failed(e, err);
    }
  }

  private entry(name: string): Entry {
    const e = this.entries.get(name);
    if (!e) throw new PluginNotFoundError(`no plugin named ${name} in ${this.core.config.plugins.dir}`);
    return e;
  }

  /** plugins.disabled always wins; then the operator's override; then plugins.enabled. */
  private wanted(e: Entry): boolean {
    const { enabled, disabled } = this.core.config.plugins;
    if (disabled.includes(e.name)) return false;
    return e.override ?? enabled.includes(e.name);
  }

  private async activate(e: Entry): Promise<void> {
    const manifest = e.manifest!;
    const limits = e.limits!;
    let sandbox: WasmPlugin | undefined;
    try {
      const instance = createPluginInstance(
        { name: e.name, path: e.path, manifest, limits, grants: e.grants },
        {
          kv: this.core.kv,
          quota: this.core.config.plugins.kv_quota,
          readMessages: (id, limit) => this.core.sessions.history(id, limit).then((rows) => rows.map((r) => ({ role: r.role, content: r.content }))),
          logs: this.logRings.of(e.name),
        },
      );
      sandbox = instance.sandbox;
      const kv = instance.kv;
      await sandbox.warm();
      for (const c of manifest.commands) {
        this.core.commands.register({
          name: c.name,
          description: c.description,
          plugin: e.name,
          sensitive: c.sensitive,
          run: (call) => this.runCommand(e, c.name, call),
        });
      }
      // A tool name already taken (built-in or another plugin's) fails the load with its owner named.
      for (const tool of pluginTools(e.name, manifest, (fn, input) => this.runExport(e, fn, input))) this.core.tools.register(tool);
      for (const h of manifest.unknown_hooks) {
        const hint = suggest(h, HOOK_NAMES);
        log("warn", "plugin names a hook this host does not know; its other hooks run", { plugin: e.name, hook: h, ...(hint ? { hint } : {}) });
        this.logRings.of(e.name).push("warn", "log", `unknown hook "${h}"${hint}: never called by this host`);
      }
      e.kv = kv;
      e.sandbox = sandbox;
      if (manifest.hooks.length > 0) this.core.dispatcher.subscribe(this.subscriber(e.name, manifest, limits, sandbox));
    } catch (err) {
      this.core.commands.unregisterPlugin(e.name);
      this.core.tools.unregisterPlugin(e.name);
      // e.g. a command name another plugin already registered: the instance (maybe a worker) goes too.
      await sandbox?.close();
      this.failed(e, err);
    }
  }

  private subscriber(name: string, manifest: Manifest, limits: SandboxLimits, sandbox: WasmPlugin): HookSubscriber {
    return {
      name,
      hooks: new Set(manifest.hooks),
      timeoutMs: limits.timeoutMs,
      enforcesDeadline: true,
      // The output is checked inside the call, so a refused output also discards the call's KV writes.
      call: async (d) => {
        let checked: CallResult["checked"];
        const accept = (text: string | undefined) => void (checked = { output: readHookOutput(d.hook, text) });
        try {
          const r = await callRetrying(sandbox, d.hook, d.json(), d.deadline, accept);
          return { fuel: r.fuel, checked };
        } catch (err) {
          throw this.callFailed(name, d.hook, err);
        }
      },
    };
  }

  private async deactivate(e: Entry): Promise<void> {
    this.core.dispatcher.unsubscribe(e.name);
    this.core.commands.unregisterPlugin(e.name);
    this.core.tools.unregisterPlugin(e.name);
    const sandbox = e.sandbox;
    e.sandbox = undefined;
    await sandbox?.close();
    await this.core.kv.flush();
    e.kv = undefined;
  }

  private async runCommand(e: Entry, command: string, call: CommandCall): Promise<string> {
    const input = JSON.stringify({
      raw_args: call.raw_args,
      session_id: call.session_id ?? null,
      session_key: call.session_key ?? null,
      platform: call.platform ?? null,
      source: call.source ?? null,
    });
    try {
      return commandOutput(await this.runExport(e, `command_${command}`, input));
    } catch (err) {
      throw new CommandError("failed", `/${command} ${(err as Error).message}`);
    }
  }

  /**
   * Calls one of the plugin's non-hook exports (a command or a tool) under its limits, counted in
   * its stats; throws "failed (kind): message" when the call fails or the plugin cannot run.
   */
  private async runExport(e: Entry, fn: string, input: string): Promise<string | undefined> {
    const { dispatcher } = this.core;
    const quarantined = dispatcher.stats(e.name)?.quarantined;
    if (quarantined) throw new Error(`failed: plugin ${e.name} is quarantined (${quarantined})`);
    const sandbox = e.sandbox;
    if (!sandbox) throw new Error(`failed: plugin ${e.name} is not active`);
    const t0 = performance.now();
    try {
      const res = await callRetrying(sandbox, fn, input, Date.now() + e.limits!.timeoutMs);
      dispatcher.recordExternalCall(e.name, performance.now() - t0, undefined, res.fuel);
      return res.output;
    } catch (err) {
      const failure = this.callFailed(e.name, fn, err);
      dispatcher.recordExternalCall(e.name, performance.now() - t0, failure);
      throw new Error(`failed (${failure.kind}): ${failure.message}`);
    }
  }

  /** Durable system-prompt sections of the active plugins for a session (and its compaction chain). */
  promptSections(sessionIds: readonly string[]): Array<{ plugin: string; text: string }> {
    const out: Array<{ plugin: string; text: string }> = [];
    for (const e of [...this.entries.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (!e.sandbox || !e.manifest || this.core.dispatcher.stats(e.name)?.quarantined) continue;
      const text = sectionOf(e.name, e.manifest, e.kv, sessionIds);
      if (text) out.push({ plugin: e.name, text });
    }
    return out;
  }

  private info(e: Entry): PluginInfo {
    const m = e.manifest;
    const stats = this.core.dispatcher.stats(e.name) ?? null;
    let status: PluginStatus = "active";
    let reason: string | null = null;
    const { disabled } = this.core.config.plugins;
    if (e.error !== null) [status, reason] = ["failed", e.error];
    else if (disabled.includes(e.name)) [status, reason] = ["disabled", "disabled by config (plugins.disabled)"];
    else if (e.override === false) [status, reason] = ["disabled", "disabled by operator"];
    else if (!this.wanted(e)) [status, reason] = ["disabled", "not listed in plugins.enabled"];
    else if (stats?.quarantined) [status, reason] = ["quarantined", stats.quarantined];
    return {
      name: e.name,
      version: m?.version ?? null,
      description: m?.description ?? null,
      hooks: m ? [...m.hooks] : [],
      unknown_hooks: m ? [...m.unknown_hooks] : [],
      tools: m ? m.tools.map((t) => ({ name: t.name, description: t.description })) : [],
      system_prompt: m?.system_prompt !== undefined,
      commands: m ? m.commands.map((c) => ({ name: c.name, description: c.description, sensitive: c.sensitive })) : [],
      capabilities: { requested: m ? [...m.capabilities] : [], granted: [...e.grants.list] },
      status,
      reason,
      stats,
    };
  }

  private failed(e: Entry, err: unknown): void {
    e.error = err instanceof Error ? err.message : String(err);
    this.logRings.of(e.name).push("error", "failure", `failed to load: ${e.error}`);
    log("error", "plugin failed to load", { plugin: e.name, reason: e.error });
  }

  private async persistQuarantine(name: string, reason: string): Promise<void> {
    try {
      await this.saveState(name, { quarantined: reason });
    } catch (err) {
      log("error", "could not persist plugin quarantine", { plugin: name, error: (err as Error).message });
    }
  }

  private async saveState(name: string, change: { enabled?: number; quarantined?: string | null }): Promise<void> {
    const updated_at = this.core.now();
    await this.core.storage.write((trx) =>
      trx
      .insertInto("plugin_state")
      .values({ name, enabled: change.enabled ?? null, quarantined: change.quarantined ?? null, updated_at })
      .onConflict((oc) => oc.column("name").doUpdateSet({ ...change, updated_at }))
      .execute(),
    );
  }
}

/** One call, run again when its guarded KV writes lost a race with another writer (`conflict`). */
async function callRetrying(sandbox: WasmPlugin, fn: string, input: string, deadline: number, accept?: (output: string | undefined) => void) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await sandbox.call(fn, input, deadline, accept);
    } catch (err) {
      if (!(err instanceof PluginCallError) || err.kind !== "conflict" || attempt >= CONFLICT_ATTEMPTS || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 * attempt)));
    }
  }
}
