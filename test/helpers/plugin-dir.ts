// A throw-away plugin directory: copies of built plugins picked from plugins-wasm/ and
// plugins-wasm/hostile/ (the runtime scans one directory), plus broken plugins written on the spot.
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HOSTILE_DIR, SEED_DIR } from "./plugins.ts";

export interface PluginDir {
  path: string;
  /** Adds a plugin folder with the given manifest (object or raw text) and wasm bytes (none: no file). */
  write(name: string, manifest: unknown, wasm?: Uint8Array | string): void;
  remove(): void;
}

export function pluginDir(seeds: readonly string[] = [], hostile: readonly string[] = []): PluginDir {
  const path = mkdtempSync(join(tmpdir(), "hookbox-plugins-"));
  for (const name of seeds) cpSync(join(SEED_DIR, name), join(path, name), { recursive: true });
  for (const name of hostile) cpSync(join(HOSTILE_DIR, name), join(path, name), { recursive: true });
  return {
    path,
    write(name, manifest, wasm) {
      const dir = join(path, name);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "manifest.json"), typeof manifest === "string" ? manifest : JSON.stringify(manifest));
      if (wasm !== undefined) writeFileSync(join(dir, "plugin.wasm"), wasm);
    },
    remove: () => rmSync(path, { recursive: true, force: true }),
  };
}
