// Finds plugins on disk and turns one folder into a checked, instrumented, compiled module.
// Every problem becomes a PluginLoadError whose message is shown as the plugin's "failed" reason.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { HOST_FUNCTION_NAMES } from "../../host-api/functions.ts";
import { InstrumentError } from "../sandbox/instrument.ts";
import { compileInstrumented } from "../sandbox/module-cache.ts";
import { HOST_MODULE, SANDBOX_FUNCTION_NAMES } from "../sandbox/wasm-plugin.ts";
import { parseManifest, type Manifest } from "./manifest.ts";
import type { SandboxLimits } from "../sandbox/wasm-plugin.ts";

export class PluginLoadError extends Error {
  override name = "PluginLoadError";
}

/** Folders `<dir>/<name>/` holding a manifest.json (one level deep: nothing nested is loaded). */
export function scanPluginDir(dir: string): Array<{ folder: string; path: string }> {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(dir, e.name, "manifest.json")))
    .map((e) => ({ folder: e.name, path: join(dir, e.name) }))
    .sort((a, b) => (a.folder < b.folder ? -1 : 1));
}

export function readManifest(path: string, folder: string): Manifest {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(join(path, "manifest.json"), "utf8"));
  } catch (err) {
    throw new PluginLoadError(`manifest.json: ${(err as Error).message}`);
  }
  const manifest = parseManifest(raw, "manifest.json");
  if (manifest.name !== folder) throw new PluginLoadError(`manifest name "${manifest.name}" does not match its folder "${folder}"`);
  return manifest;
}

// Extism's own HTTP functions would bypass the http:<host> grants: plugins use hookbox_http.
const FORBIDDEN_KERNEL = new Set(["http_request", "http_status_code", "http_headers"]);
const USER_FUNCTIONS = new Set<string>([...HOST_FUNCTION_NAMES, ...SANDBOX_FUNCTION_NAMES]);

/** Reads, checks and compiles plugin.wasm for the given memory cap. */
export function compilePlugin(path: string, manifest: Manifest, limits: SandboxLimits): WebAssembly.Module {
  const file = join(path, "plugin.wasm");
  if (!existsSync(file)) throw new PluginLoadError("plugin.wasm is missing (run npm run build:plugins)");
  const bytes = new Uint8Array(readFileSync(file));
  if (!WebAssembly.validate(bytes)) throw new PluginLoadError("plugin.wasm is not a valid WebAssembly module");
  let module: WebAssembly.Module;
  try {
    module = compileInstrumented(bytes, { memoryPages: limits.memoryPages, startFuel: limits.fuel });
  } catch (err) {
    if (err instanceof InstrumentError) throw new PluginLoadError(`plugin.wasm: ${err.message}`);
    throw err;
  }
  for (const imp of WebAssembly.Module.imports(module)) {
    const ok =
      (imp.module === "extism:host/env" && !FORBIDDEN_KERNEL.has(imp.name)) ||
      (imp.module === HOST_MODULE && USER_FUNCTIONS.has(imp.name)) ||
      imp.module === "hookbox:fuel";
    if (!ok) throw new PluginLoadError(`plugin.wasm imports unknown host function "${imp.module}" "${imp.name}"`);
  }
  const exports = new Set(WebAssembly.Module.exports(module).map((e) => e.name));
  for (const hook of manifest.hooks) {
    if (!exports.has(hook)) throw new PluginLoadError(`manifest lists hook ${hook} but plugin.wasm exports no function "${hook}"`);
  }
  for (const t of manifest.tools) {
    if (!exports.has(`tool_${t.name}`)) throw new PluginLoadError(`manifest lists tool ${t.name} but plugin.wasm exports no function "tool_${t.name}"`);
  }
  for (const c of manifest.commands) {
    if (!exports.has(`command_${c.name}`)) {
      throw new PluginLoadError(`manifest lists command /${c.name} but plugin.wasm exports no function "command_${c.name}"`);
    }
  }
  return module;
}
