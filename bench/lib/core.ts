// A real core on a throw-away embedded libSQL file, optionally with a fleet of WASM plugins loaded
// through the real plugin runtime (manager, host API, sandbox): benchmarks measure the shipped path.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig, type ConfigInput } from "../../runtime/config.ts";
import { createCore, type Core } from "../../runtime/core.ts";
import { setLogLevel } from "../../runtime/log.ts";
import { startPluginHost } from "../../runtime/plugins/manager.ts";
import { openStorage, type Storage } from "../../runtime/storage/db.ts";

/** `count` copies of the plugin built in plugins-wasm/<from>, named `<prefix>-00`, `<prefix>-01`, ... */
export interface FleetSpec {
  from: string;
  prefix: string;
  count: number;
  /** Capabilities the operator grants each copy (default: what its manifest requests). */
  grants?: string[];
  /** The first copy keeps the manifest's slash commands (a command name can be registered once). */
  firstKeepsCommands?: boolean;
  /** Operator limit overrides (config plugins.limits) for each copy. */
  limits?: NonNullable<NonNullable<ConfigInput["plugins"]>["limits"]>[string];
}

export interface BenchCore {
  core: Core;
  /** Plugin names loaded, in name (= delivery) order. */
  plugins: string[];
  close(): Promise<void>;
}

const root = new URL("../../", import.meta.url).pathname;

/** Writes each plugin copy as its own folder (manifest name = folder name, as the loader demands). */
function writeFleet(dir: string, specs: readonly FleetSpec[]): { names: string[]; config: NonNullable<ConfigInput["plugins"]> } {
  const names: string[] = [];
  const grants: Record<string, string[]> = {};
  const limits: Record<string, NonNullable<FleetSpec["limits"]>> = {};
  for (const spec of specs) {
    const src = join(root, "plugins-wasm", spec.from);
    const manifest = JSON.parse(readFileSync(join(src, "manifest.json"), "utf8")) as { name: string; capabilities?: string[] };
    for (let i = 0; i < spec.count; i++) {
      const name = `${spec.prefix}-${String(i).padStart(2, "0")}`;
      const target = join(dir, name);
      mkdirSync(target, { recursive: true });
      copyFileSync(join(src, "plugin.wasm"), join(target, "plugin.wasm"));
      // Copies drop the commands: a slash command name may be registered once.
      const keep = i === 0 && spec.firstKeepsCommands === true;
      writeFileSync(join(target, "manifest.json"), JSON.stringify(keep ? { ...manifest, name } : { ...manifest, name, commands: [] }));
      grants[name] = spec.grants ?? manifest.capabilities ?? [];
      if (spec.limits) limits[name] = spec.limits;
      names.push(name);
    }
  }
  return { names: names.sort(), config: { dir, enabled: names, grants, limits } };
}

/**
 * Opens a core on a fresh temp database; with `fleet`, starts the WASM plugin runtime on it.
 * `beforeStart` writes to the database before anything is loaded (e.g. plugin KV a plugin reads at load).
 */
export async function openBenchCore(
  opts: { fleet?: readonly FleetSpec[]; config?: ConfigInput; beforeStart?: (storage: Storage) => Promise<void> } = {},
): Promise<BenchCore> {
  setLogLevel("silent");
  const dir = mkdtempSync(join(tmpdir(), "hookbox-bench-"));
  const fleet = opts.fleet && opts.fleet.length > 0 ? writeFleet(join(dir, "plugins"), opts.fleet) : undefined;
  const config = parseConfig(
    {
      db_url: `file:${join(dir, "hookbox.db")}`,
      sessions_dir: join(dir, "sessions"),
      ...opts.config,
      ...(fleet ? { plugins: { ...opts.config?.plugins, ...fleet.config } } : {}),
    },
    {},
  );
  if (opts.beforeStart) {
    const storage = await openStorage(config.db_url);
    try {
      await opts.beforeStart(storage);
    } finally {
      await storage.close();
    }
  }
  const core = await createCore(config, fleet ? { pluginHost: startPluginHost } : {});
  const failed = core.plugins.list().filter((p) => p.status !== "active");
  if (failed.length > 0) {
    await core.close();
    throw new Error(`bench plugins not active: ${failed.map((p) => `${p.name} (${p.reason})`).join(", ")}`);
  }
  return {
    core,
    plugins: fleet?.names ?? [],
    async close() {
      await core.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A benchmark whose plugins failed (fuel, trap...) measured less work than it claims: refuse it. */
export function assertNoPluginFailures(core: Core, what: string): void {
  const failed = core.plugins
    .list()
    .filter((p) => p.stats && Object.values(p.stats.failures).some((n) => n > 0))
    .map((p) => `${p.name}: ${p.stats!.last_error}`);
  if (failed.length > 0) throw new Error(`${what}: plugin calls failed, figures would be meaningless: ${failed.join("; ")}`);
}
