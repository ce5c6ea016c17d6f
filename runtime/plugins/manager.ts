// The WASM plugin runtime behind PluginHost: the lifecycle of the plugins in config.plugins.dir.
// It loads each folder, starts the wanted ones (status.ts) through the instance factory
// (instance.ts), subscribes them to the dispatcher and registers their commands and tools through
// the command bridge (command-bridge.ts); operator overrides and quarantines persist in
// plugin_state (state.ts). A plugin that fails to load is listed as "failed" with its reason; the
// others run.
import { HOOK_NAMES } from "../../hooks/catalogue.ts";
import { PluginCallError } from "../../hooks/failures.ts";
import { grantedOf } from "../../host-api/capabilities.ts";
import { databaseEndpoint, type ReservedEndpoint } from "../../host-api/reserved-endpoints.ts";
import type { MissingCommand } from "../commands/registry.ts";
import type { Core } from "../core.ts";
import { conflict } from "../errors.ts";
import { log } from "../log.ts";
import { compileEagerly, EAGER_WASM_FLAG } from "../sandbox/eager-compile.ts";
import type { AcceptOutput, WasmPlugin } from "../sandbox/wasm-plugin.ts";
import { CommandBridge } from "./command-bridge.ts";
import type { PluginEntry } from "./entry.ts";
import { PluginNotFoundError, type PluginHost, type PluginInfo } from "./host.ts";
import { createPluginInstance } from "./instance.ts";
import { cappedLimits, effectiveLimits } from "./limits.ts";
import { readManifest, scanPluginDir } from "./loader.ts";
import { PluginLogs, type PluginLogEntry } from "./logs.ts";
import { pluginTools, sectionOf, SYSTEM_PROMPT_KEY } from "./plugin-api.ts";
import { PluginStateStore } from "./state.ts";
import type { PluginStateTable } from "../storage/schema.ts";
import { isWanted, pluginInfo } from "./status.ts";
import { suggest } from "../util/suggest.ts";
import { uncheckedKeywords } from "../tools/registry.ts";
import { ownValue } from "../util/own.ts";
import { KeyedMutex } from "../util/mutex.ts";

type Entry = PluginEntry;

/** `otherDatabases`: URLs of databases besides the core's that no plugin may reach (a one-off call's real one). */
export async function startPluginHost(core: Core, otherDatabases: readonly string[] = []): Promise<PluginManager> {
  const manager = new PluginManager(core, otherDatabases);
  await manager.start();
  return manager;
}

export class PluginManager implements PluginHost {
  private readonly entries = new Map<string, Entry>();
  private readonly logRings: PluginLogs;
  private readonly state: PluginStateStore;
  private readonly bridge: CommandBridge;
  /** One change at a time per plugin (enable, disable, reload, state sync): two at once started it twice. */
  private readonly changing = new KeyedMutex();
  /** Each plugin's plugin_state row as last applied here, to tell what other processes changed. */
  private readonly applied = new Map<string, string>();
  /** The database server, when it is one: no plugin's http: grant reaches it (reserved-endpoints.ts). */
  private readonly reservedEndpoints: readonly ReservedEndpoint[];
  private closed = false;

  constructor(
    private readonly core: Core,
    otherDatabases: readonly string[] = [],
  ) {
    this.reservedEndpoints = [core.config.db_url, ...otherDatabases].map(databaseEndpoint).filter((e) => e !== undefined);
    this.logRings = new PluginLogs(core.now);
    this.state = new PluginStateStore(core.storage, core.now);
    this.bridge = new CommandBridge(core.dispatcher, this.logRings);
    core.commands.whyMissing((command) => this.declaring((m) => m.commands.some((c) => c.name === command)));
    core.tools.whyMissing((tool) => this.declaring((m) => m.tools.some((t) => t.name === tool)));
    core.commands.rivalsFrom((command, plugin) => this.rivalFor((m) => m.commands.some((c) => c.name === command), plugin));
    core.tools.rivalsFrom((tool, plugin) => this.rivalFor((m) => m.tools.some((t) => t.name === tool), plugin));
  }

  /**
   * A plugin other than `plugin` whose manifest `declares` the name, that the operator wants running
   * (enabled, not disabled) but does not run (failed to load, quarantined): it still claims the name,
   * as "name (failed)". A disabled one does not (disabling all but one settles a claim).
   */
  private rivalFor(declares: (m: NonNullable<Entry["manifest"]>) => boolean, plugin: string): string | undefined {
    for (const e of this.entries.values()) {
      if (e.name === plugin || !e.manifest || !declares(e.manifest) || !isWanted(e, this.core.config)) continue;
      if (e.error !== null) return `${e.name} (failed)`;
      if (this.core.dispatcher.quarantineOf(e.name) !== null) return `${e.name} (quarantined)`;
    }
    return undefined;
  }

  /**
   * The plugin whose manifest `declares` a command or tool while it is not running, with its status;
   * one that is starting first (a call waits for it), whatever a disabled one declares too.
   */
  private declaring(declares: (m: NonNullable<Entry["manifest"]>) => boolean): MissingCommand | undefined {
    let first: MissingCommand | undefined;
    for (const e of this.entries.values()) {
      if (!e.manifest || !declares(e.manifest)) continue;
      const { status, reason } = this.info(e);
      if (status !== "active") first ??= { plugin: e.name, status, reason };
      // Active, not running: between a reload's (or an enable's) stop and start. Not "unknown" (404).
      else if (!e.sandbox) return { plugin: e.name, status: "starting", reason: "being loaded; retry in a moment" };
    }
    return first;
  }

  async start(): Promise<void> {
    const { config, dispatcher } = this.core;
    if (!compileEagerly()) {
      log("warn", `Deno started without --v8-flags=${EAGER_WASM_FLAG}: each plugin function is compiled at its first call, on the server's thread and unmetered (a hostile module can hold the server for seconds); start it with deno task serve, or set DENO_V8_FLAGS=${EAGER_WASM_FLAG}`);
    }
    const state = await this.state.load();
    for (const { folder, path } of scanPluginDir(config.plugins.dir)) {
      const entry = this.newEntry(folder, path);
      this.restore(entry, state.get(folder));
      this.reload(entry);
    }
    // Persisted under the plugin's lock, like an enable, so the state sync never sees it half done.
    dispatcher.setQuarantineListener(
      (name, reason) => void this.changing.run(name, async () => this.wrote(name, await this.state.quarantined(name, reason))),
    );
    // A plugin whose manifest failed keeps that reason (activating it would replace it with a TypeError).
    for (const entry of this.entries.values()) if (entry.error === null && this.wanted(entry)) await this.activate(entry);
    const active = this.list().filter((p) => p.status === "active").map((p) => p.name);
    log("info", "plugins loaded", { dir: config.plugins.dir, active, total: this.entries.size });
  }

  /**
   * The persisted state onto a plugin's entry and this process's dispatcher: the operator's
   * override (or none), and the quarantine (or its lifting).
   */
  private restore(entry: Entry, row: PluginStateTable | undefined): void {
    this.wrote(entry.name, row);
    entry.override = row?.enabled == null ? null : row.enabled === 1;
    const { dispatcher } = this.core;
    if (row?.quarantined) {
      if (dispatcher.quarantineOf(entry.name) !== row.quarantined) dispatcher.quarantine(entry.name, row.quarantined);
    } else if (row?.enabled === 1 || dispatcher.quarantineOf(entry.name) !== null) {
      // A changed row that says enabled, with no quarantine, is an operator's enable (here, on
      // another node or the CLI): it lifts the hooks' own quarantines too, which only this process keeps.
      dispatcher.release(entry.name);
    }
  }

  /** Remembers `row` as the plugin's state this process has applied (or written itself). */
  private wrote(name: string, row: PluginStateTable | undefined): void {
    this.applied.set(name, stateKey(row));
  }

  /**
   * Applies what other processes (another node, the CLI) changed in plugin_state since the last
   * look: an operator's enable or disable, a quarantine or its lifting. A running server calls it
   * every STATE_SYNC_MS, so such a change holds on every node, not only the one that made it. A
   * changed row is read again under the plugin's lock, where this process's own changes are made.
   */
  async syncState(): Promise<void> {
    const rows = await this.state.load();
    for (const e of this.entries.values()) {
      if (this.closed) return;
      if (this.applied.get(e.name) === stateKey(rows.get(e.name))) continue;
      await this.changing
        .run(e.name, async () => {
          const row = await this.state.get(e.name);
          // Its folder went meanwhile (a reload), the row is what this process wrote, or shut down.
          if (this.closed || this.entries.get(e.name) !== e || this.applied.get(e.name) === stateKey(row)) return;
          this.restore(e, row);
          if (!this.wanted(e)) return this.deactivate(e);
          if (e.sandbox) return;
          // Enabled elsewhere: its manifest is read again with the module activate reads (maybe changed or fixed).
          this.reload(e);
          if (e.error === null) await this.activate(e);
          if (this.closed) return this.deactivate(e); // close() went by while it started
          log("info", "plugin state changed by another process", { plugin: e.name, status: this.info(e).status });
        })
        .catch((err: unknown) => log("warn", "could not apply a plugin state change of another process; the next look tries again", { plugin: e.name, error: String(err) }));
    }
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
    return this.changing.run(name, () => this.refreshNow(name));
  }

  private async refreshNow(name: string): Promise<PluginInfo | undefined> {
    const found = scanPluginDir(this.core.config.plugins.dir).find((p) => p.folder === name);
    let e = this.entries.get(name);
    if (e) await this.deactivate(e);
    if (!found) {
      this.entries.delete(name);
      const { enabled, disabled, grants, limits, fail_closed } = this.core.config.plugins;
      // The configuration still naming it would be refused at the next start (checkPluginNames): said now, not then.
      const named = [
        enabled.includes(name) && "plugins.enabled",
        disabled.includes(name) && "plugins.disabled",
        Object.hasOwn(grants, name) && "plugins.grants",
        Object.hasOwn(limits, name) && "plugins.limits",
        fail_closed.includes(name) && "plugins.fail_closed",
      ].filter(Boolean);
      if (named.length > 0) log("warn", "plugin removed; the configuration still names it, so the next start refuses it until it is put back or taken out", { plugin: name, in: named.join(", ") });
      else log("info", "plugin removed", { plugin: name });
      return undefined;
    }
    e ??= this.newEntry(name, found.path);
    // An enable (or quarantine) persisted for it meanwhile applies, e.g. `hookbox plugins enable`
    // run in another process after this server saw the folder appear.
    this.restore(e, (await this.state.load()).get(name));
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
  async invoke(name: string, fn: string, input: string, accept?: AcceptOutput): Promise<{ output: string | undefined; fuel: number; ms: number }> {
    const e = this.entry(name);
    if (!e.sandbox) throw new PluginCallError("unavailable", `plugin ${name} is not active: ${this.info(e).reason ?? "not loaded"}`);
    return this.bridge.invoke(e, fn, input, accept);
  }

  list(): PluginInfo[] {
    return [...this.entries.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((e) => this.info(e));
  }

  running(name: string): boolean {
    return this.entries.get(name)?.sandbox !== undefined;
  }

  settled(name: string): Promise<void> {
    return this.changing.run(name, () => undefined);
  }

  get(name: string): PluginInfo | undefined {
    const e = this.entries.get(name);
    return e && this.info(e);
  }

  enable(name: string): Promise<PluginInfo> {
    return this.changing.run(name, () => this.enableNow(name));
  }

  private async enableNow(name: string): Promise<PluginInfo> {
    const e = this.entry(name);
    // The config's deny list wins over an operator's enable: refused, not stored as done.
    if (this.core.config.plugins.disabled.includes(name)) {
      throw conflict("disabled_by_config", `plugin ${name} is disabled by the config (plugins.disabled), which an enable does not override: remove it from plugins.disabled (HOOKBOX_PLUGINS_DISABLED) and restart`);
    }
    this.wrote(name, await this.state.save(name, { enabled: 1, quarantined: null }));
    e.override = true;
    this.core.dispatcher.release(name);
    // Started now: its manifest is read again with the module activate reads (the operator may have
    // changed or fixed them); a stopped plugin's old manifest never runs its new module.
    if (!e.sandbox) this.reload(e);
    if (e.error === null && this.wanted(e) && !e.sandbox) await this.activate(e);
    return this.info(e);
  }

  disable(name: string): Promise<PluginInfo> {
    return this.changing.run(name, () => this.disableNow(name));
  }

  private async disableNow(name: string): Promise<PluginInfo> {
    const e = this.entry(name);
    this.wrote(name, await this.state.save(name, { enabled: 0 }));
    e.override = false;
    await this.deactivate(e);
    return this.info(e);
  }

  /** Waits until every KV write made so far is in libSQL. */
  async flush(): Promise<void> {
    await this.core.kv.flush();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.core.dispatcher.setQuarantineListener(undefined);
    for (const e of this.entries.values()) await this.deactivate(e);
  }

  private reload(e: Entry): void {
    const { config } = this.core;
    e.error = null;
    try {
      e.manifest = readManifest(e.path, e.name);
      e.grants = grantedOf(e.manifest.capabilities, ownValue(config.plugins.grants, e.name));
      e.limits = effectiveLimits(e.name, e.manifest.limits, config);
      for (const note of cappedLimits(e.name, e.manifest.limits, config)) {
        this.logRings.of(e.name).push("warn", "log", note);
        log("warn", note, { plugin: e.name });
      }
    } catch (err) {
      // Nothing of the files read before stays (version, hooks, commands and grants shown with
      // "failed"), as at a start whose manifest fails.
      [e.manifest, e.limits, e.grants] = [undefined, undefined, grantedOf([], [])];
      this.failed(e, err);
      return;
    }
    // Fail-closed is about pre_tool_call: a plugin without it never answers one, so it never blocks.
    if (config.plugins.fail_closed.includes(e.name) && !e.manifest.hooks.includes("pre_tool_call")) {
      const text = "plugins.fail_closed names it, but its manifest has no pre_tool_call hook: while it runs it has no say over tool calls (not running, it blocks them, as any fail-closed plugin)";
      this.logRings.of(e.name).push("warn", "log", text);
      log("warn", text, { plugin: e.name });
    }
  }

  private entry(name: string): Entry {
    const e = this.entries.get(name);
    if (!e) throw new PluginNotFoundError(`no plugin named ${name} in ${this.core.config.plugins.dir}`);
    return e;
  }

  private wanted(e: Entry): boolean {
    return isWanted(e, this.core.config);
  }

  private async activate(e: Entry): Promise<void> {
    const manifest = e.manifest!;
    const limits = e.limits!;
    let sandbox: WasmPlugin | undefined;
    try {
      for (const t of manifest.tools) this.core.tools.refuseBuiltinName(t.name);
      const instance = await createPluginInstance(
        { name: e.name, path: e.path, manifest, limits, grants: e.grants },
        {
          kv: this.core.kv,
          quota: this.core.config.plugins.kv_quota,
          readMessages: (id, limit, maxBytes) => this.core.kv.recentMessages(id, limit, maxBytes),
          logs: this.logRings.of(e.name),
          reservedEndpoints: this.reservedEndpoints,
        },
      );
      sandbox = instance.sandbox;
      const kv = instance.kv;
      await sandbox.warm();
      for (const c of manifest.commands) {
        const conflict = this.core.commands.register({
          name: c.name,
          description: c.description,
          plugin: e.name,
          sensitive: c.sensitive,
          run: (call) => this.bridge.runCommand(e, c.name, call),
        });
        // Two plugins claim the name: neither runs it (registry.ts).
        if (conflict) this.sayConflict(e.name, "command", `/${conflict.name}`, conflict.plugins);
      }
      // A built-in's tool name fails the load with that reason; one another plugin declares runs for
      // neither (registry.ts): said in the log and both rings, as for commands.
      for (const tool of pluginTools(e.name, manifest, (tool, input) => this.bridge.runTool(e, tool, input))) {
        const conflict = this.core.tools.register(tool);
        if (conflict) this.sayConflict(e.name, "tool", conflict.name, conflict.plugins);
        for (const where of uncheckedKeywords(tool.spec.parameters)) {
          this.logRings.of(e.name).push("warn", "log", `tool ${tool.spec.name}: ${where} is shown to the model but not checked by the host (no bound on its work): check it in the tool`);
        }
      }
      for (const c of e.grants.ungranted) {
        log("warn", "plugin requests a capability the operator has not granted; its calls that need it fail as denied", { plugin: e.name, capability: c, grant: `plugins.grants.${e.name}` });
        this.logRings.of(e.name).push("warn", "log", `capability ${c} is requested but not granted (config plugins.grants.${e.name}, then restart): host calls that need it fail as denied`);
      }
      for (const f of manifest.unknown_fields) {
        log("warn", "plugin manifest has a field this host does not know; ignored", { plugin: e.name, field: f });
        this.logRings.of(e.name).push("warn", "log", `manifest.json: unknown field ${f}: ignored`);
      }
      for (const h of manifest.unknown_hooks) {
        const hint = suggest(h, HOOK_NAMES);
        log("warn", "plugin names a hook this host does not know; its other hooks run", { plugin: e.name, hook: h, ...(hint ? { hint } : {}) });
        this.logRings.of(e.name).push("warn", "log", `unknown hook "${h}"${hint}: never called by this host`);
      }
      e.kv = kv;
      e.sandbox = sandbox;
      if (manifest.hooks.length > 0) this.core.dispatcher.subscribe(this.bridge.subscriber(e, sandbox));
    } catch (err) {
      this.core.commands.unregisterPlugin(e.name);
      this.core.tools.unregisterPlugin(e.name);
      // e.g. a command name another plugin already registered: the instance (maybe a worker) goes too.
      await sandbox?.close();
      this.failed(e, err);
    }
  }

  /** A command or tool name several plugins claim runs for none of them: said in the log and each one's ring. */
  private sayConflict(plugin: string, kind: "command" | "tool", name: string, plugins: readonly string[]): void {
    const text = `${kind} ${name} is claimed by plugins ${plugins.join(", ")}: refused for all until the operator disables all but one`;
    log("warn", `plugin ${kind} conflict`, { plugin, [kind]: name, plugins });
    for (const p of plugins) this.logRings.of(p).push("warn", "log", text);
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

  /** Durable system-prompt sections of the active plugins for a session (and its compaction chain). */
  promptSections(sessionIds: readonly string[]): Array<{ plugin: string; text: string }> {
    const live = [...this.entries.values()]
      .filter((e) => e.sandbox && e.manifest && !this.core.dispatcher.quarantineOf(e.name))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    if (live.length === 0) return [];
    // Every plugin's stored sections for the session chain in one read (one round trip to a server);
    // a write of this process the database does not have yet wins.
    const stored = this.core.kv.valuesOf(SYSTEM_PROMPT_KEY, live.map((e) => e.name), ["", ...sessionIds]);
    const out: Array<{ plugin: string; text: string }> = [];
    for (const e of live) {
      const lookup = (scope: string) => {
        const staged = e.kv?.staged(scope, SYSTEM_PROMPT_KEY);
        return staged !== undefined ? (staged ?? undefined) : stored.get(`${e.name}\u0000${scope}`);
      };
      const text = sectionOf(e.name, e.manifest!, lookup, sessionIds);
      if (text) out.push({ plugin: e.name, text });
    }
    return out;
  }

  private info(e: Entry): PluginInfo {
    return pluginInfo(e, this.core.config, this.core.dispatcher);
  }

  private failed(e: Entry, err: unknown): void {
    e.error = err instanceof Error ? err.message : String(err);
    this.logRings.of(e.name).push("error", "failure", `failed to load: ${e.error}`);
    log("error", "plugin failed to load", { plugin: e.name, reason: e.error });
  }
}

/** How often a running server applies plugin_state changes made by other processes (syncState). */
export const STATE_SYNC_MS = 2_000;

// updated_at too: an enable of a plugin already enabled changes nothing else, and must still reach
// every node (it lifts the hooks' quarantines there).
const stateKey = (row: PluginStateTable | undefined) => JSON.stringify([row?.enabled ?? null, row?.quarantined ?? null, row?.updated_at ?? null]);
