// Builds the agent core: storage, dispatcher, command registry, provider and the services, wired
// once. HTTP, CLI and tests all start from createCore.
import { log } from "./log.ts";
import type { Config } from "./config.ts";
import { openStorage, type Storage } from "./storage/db.ts";
import { KvStore } from "./storage/plugin-kv.ts";
import { HookDispatcher } from "../hooks/dispatcher.ts";
import { CommandRegistry } from "./commands/registry.ts";
import { registerBuiltins } from "./commands/builtins.ts";
import { noPlugins, type PluginHost } from "./plugins/host.ts";
import { KeyedMutex } from "./util/mutex.ts";
import type { CoreContext } from "./context.ts";
import { createProvider } from "./providers/index.ts";
import type { Provider } from "./providers/types.ts";
import { SessionService } from "./sessions/service.ts";
import { DeletionService } from "./deletion/service.ts";
import { CompactionEngine } from "./compaction/engine.ts";
import { TurnService } from "./turns/service.ts";
import { MaintenanceService } from "./maintenance/service.ts";
import { builtinTools } from "./tools/builtin.ts";
import { ToolRegistry } from "./tools/registry.ts";

export interface Core extends CoreContext {
  readonly storage: Storage;
  readonly commands: CommandRegistry;
  /** Built-in tools and the tools enabled plugins declare. */
  readonly tools: ToolRegistry;
  readonly provider: Provider;
  readonly sessions: SessionService;
  readonly deletion: DeletionService;
  readonly compaction: CompactionEngine;
  readonly turns: TurnService;
  readonly maintenance: MaintenanceService;
  /** The plugin runtime; `noPlugins` until (or unless) one is started. */
  plugins: PluginHost;
  close(): Promise<void>;
}

export type PluginHostFactory = (core: Core) => Promise<PluginHost>;

export interface CoreOptions {
  pluginHost?: PluginHostFactory | undefined;
  now?: (() => number) | undefined;
  /** Overrides the configured provider (tests, embedding). */
  provider?: Provider | undefined;
}

export async function createCore(config: Config, opts: CoreOptions = {}): Promise<Core> {
  const storage = await openStorage(config.db_url, { authToken: config.db_auth_token, durability: config.db_synchronous });
  const now = opts.now ?? Date.now;
  const dispatcher = new HookDispatcher({
    timeoutMs: config.plugins.hook_callback_timeout * 1000,
    cooloffMs: config.plugins.cooloff_seconds * 1000,
    quarantineAfter: config.plugins.quarantine_after,
    // Each WASM plugin's own max_output_bytes (up to 1 MiB from a manifest, any size from the
    // operator) is enforced by its sandbox; the dispatcher's 64 KiB default would cap them all.
    maxOutputBytes: Number.MAX_SAFE_INTEGER,
    maxInjectedChars: config.plugins.max_injected_chars,
    now,
    log,
  });
  const provider = opts.provider ?? createProvider(config.provider);
  // Plugin KV lives in the database only: read synchronously (a WASM call cannot await), written by
  // one group-committing writer per process.
  const kv = KvStore.open(storage, {
    now,
    onError: (plugins, err) => log("error", "plugin kv write failed", { plugins, error: (err as Error).message }),
  });
  const ctx: CoreContext = { config, storage, dispatcher, kv, now, sessionLocks: new KeyedMutex(), model: provider.model };
  const commands = new CommandRegistry(config.plugins.command_users);
  const sessions = new SessionService(ctx);
  const deletion = new DeletionService(ctx);
  const compaction = new CompactionEngine(ctx, provider);
  const tools = new ToolRegistry(builtinTools(now));
  // core.plugins is set after the core is built (and swapped by tests): read it at each call.
  const turns = new TurnService(
    ctx,
    sessions,
    compaction,
    provider,
    tools,
    commands,
    (ids) => core.plugins.promptSections(ids),
    { get: (name) => core.plugins.get(name), running: (name) => core.plugins.running(name), settled: (name) => core.plugins.settled(name) },
  );
  const maintenance = new MaintenanceService(ctx, sessions, deletion, compaction);
  registerBuiltins(commands, { sessions, compaction, deletion });
  let closed = false;
  const core: Core = {
    ...ctx,
    storage,
    commands,
    tools,
    provider,
    sessions,
    deletion,
    compaction,
    turns,
    maintenance,
    plugins: noPlugins,
    async close() {
      if (closed) return;
      closed = true;
      await core.plugins.close();
      await kv.close();
      await storage.close();
    },
  };
  if (opts.pluginHost) {
    try {
      core.plugins = await opts.pluginHost(core);
    } catch (err) {
      await kv.close();
      await storage.close();
      throw err;
    }
  }
  return core;
}
