// `hookbox serve --watch`: polls plugins.dir and hands every plugin folder whose manifest.json,
// plugin.wasm or plugin.build-error changed (or that appeared or vanished) to `refresh`. Polling (stat
// of three files per folder) works the same on Node and Deno and on every file system; plugin.wasm
// is replaced by a rename in build.mjs, so a half-written module is never seen.
import { statSync } from "node:fs";
import { join } from "node:path";
import { log } from "../log.ts";
import { scanPluginDir } from "./loader.ts";

const WATCHED = ["manifest.json", "plugin.wasm", "plugin.build-error"];

export interface PluginWatcher {
  /** One scan now (tests call it instead of waiting for the timer); resolves after the refreshes. */
  scan(): Promise<string[]>;
  close(): void;
}

function fingerprint(path: string): string {
  return WATCHED.map((f) => {
    try {
      const s = statSync(join(path, f));
      return `${s.ino}:${s.mtimeMs}:${s.size}`;
    } catch {
      return "-";
    }
  }).join("|");
}

/** Every plugin folder (as the manager finds them) with its fingerprint. */
function snapshot(dir: string): Map<string, string> {
  return new Map(scanPluginDir(dir).map(({ folder, path }) => [folder, fingerprint(path)]));
}

export function watchPlugins(dir: string, refresh: (folder: string) => Promise<void>, intervalMs = 500): PluginWatcher {
  let last = snapshot(dir);
  let running: Promise<string[]> | undefined;
  const scan = (): Promise<string[]> =>
    (running ??= (async () => {
      const now = snapshot(dir);
      const changed = [...new Set([...now.keys(), ...last.keys()])].filter((name) => now.get(name) !== last.get(name)).sort();
      last = now;
      for (const name of changed) {
        try {
          await refresh(name);
        } catch (err) {
          log("error", "plugin reload failed", { plugin: name, error: (err as Error).message });
        }
      }
      return changed;
    })().finally(() => (running = undefined)));
  const timer = setInterval(() => void scan(), intervalMs);
  (timer as { unref?: () => void }).unref?.();
  log("info", "watching plugins", { dir, interval_ms: intervalMs });
  return { scan, close: () => clearInterval(timer) };
}
