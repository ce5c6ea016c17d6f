// Finds plugins on disk and turns one folder into a checked, instrumented, compiled module.
// Every problem becomes a PluginLoadError whose message is shown as the plugin's "failed" reason.
//
// A plugin folder is untrusted input: its files are read only when they are regular files (a FIFO
// would block start-up forever, /dev/zero would eat memory), of bounded size, and inside the
// folder (a symlink may point elsewhere in the folder, never out of it); they are opened with
// O_NOFOLLOW where the final path must not be a link, and the size is checked on the open file.
import { INVOKED_AS } from "../cli/invoked-as.ts";
import { closeSync, constants, existsSync, fstatSync, lstatSync, openSync, readdirSync, readSync, realpathSync, statSync } from "node:fs";
import { basename, isAbsolute, join, relative } from "node:path";
import { HOST_FUNCTION_NAMES } from "../../host-api/functions.ts";
import { WASI_FUNCTION_NAMES, WASI_MODULE } from "../../host-api/wasi.ts";
import { adaptWasiModule } from "../sandbox/wasi-adapt.ts";
import { KERNEL_BLOCK_BYTES } from "../sandbox/fuel.ts";
import { InstrumentError, KERNEL_MODULE, MAX_MODULE_BYTES } from "../sandbox/instrument.ts";
import { compileInstrumented } from "../sandbox/module-cache.ts";
import { WasmFormatError } from "../sandbox/wasm-binary.ts";
import { HOST_MODULE, refusedImport, SANDBOX_FUNCTION_NAMES, WASI_SANDBOX_MODULE } from "../sandbox/imports.ts";
import { suggest } from "../util/suggest.ts";
import { parseManifest, type Manifest } from "./manifest.ts";
import type { SandboxLimits } from "../sandbox/wasm-plugin.ts";

export class PluginLoadError extends Error {
  override name = "PluginLoadError";
}

/** Largest manifest.json read (its fields are capped far below this by the schema). */
export const MAX_MANIFEST_BYTES = 64 * 1024;

/**
 * The bytes of `<dir>/<file>` when it is a regular file of at most `max` bytes inside `dir`
 * (following symlinks only within it); otherwise a PluginLoadError naming the problem.
 */
export function readPluginFile(dir: string, file: string, max: number): Buffer {
  const path = join(dir, file);
  let target = path;
  try {
    if (lstatSync(path).isSymbolicLink()) {
      target = realpathSync(path);
      const rel = relative(realpathSync(dir), target);
      if (rel.startsWith("..") || isAbsolute(rel)) throw new PluginLoadError(`${file} is a symlink out of the plugin folder`);
    }
    const kind = lstatSync(target);
    if (!kind.isFile()) throw new PluginLoadError(`${file} is not a regular file (${describeKind(kind)})`);
  } catch (err) {
    if (err instanceof PluginLoadError) throw err;
    throw new PluginLoadError(`${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  // O_NOFOLLOW: the resolved path may not have become a link since; O_NONBLOCK: a FIFO swapped in
  // meanwhile does not block the open (fstat below refuses it).
  const fd = openSync(target, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0));
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new PluginLoadError(`${file} is not a regular file (${describeKind(st)})`);
    if (st.size > max) throw new PluginLoadError(`${file} is ${st.size} bytes, over the limit of ${max} bytes`);
    const buf = Buffer.alloc(st.size);
    let at = 0;
    while (at < st.size) {
      const n = readSync(fd, buf, at, st.size - at, at);
      if (n === 0) break;
      at += n;
    }
    return buf.subarray(0, at);
  } finally {
    closeSync(fd);
  }
}

function describeKind(st: { isDirectory(): boolean; isFIFO(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean; isSocket(): boolean }): string {
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a FIFO";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  if (st.isSocket()) return "a socket";
  return "not a file";
}

/**
 * Folders `<dir>/<name>/` holding a manifest.json (one level deep: nothing nested is loaded). A
 * symlink to a folder counts (a deploy that swaps a link); the plugin's files must then lie inside
 * the folder it points to (readPluginFile).
 */
export function scanPluginDir(dir: string): Array<{ folder: string; path: string }> {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => (e.isDirectory() || (e.isSymbolicLink() && isFolder(join(dir, e.name)))) && existsSync(join(dir, e.name, "manifest.json")))
    .map((e) => ({ folder: e.name, path: join(dir, e.name) }))
    .sort((a, b) => (a.folder < b.folder ? -1 : 1));
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false; // a dangling link
  }
}

/**
 * The command names the manifests of `plugins` declare, read leniently (no full check: a plugin that
 * fails to load for another reason still declares its commands, and a folder that is not enabled
 * costs no schema work); `unreadable` lists the folders whose manifest is not JSON at all.
 */
export function declaredCommands(plugins: ReadonlyArray<{ folder: string; path: string }>): { names: string[]; unreadable: string[] } {
  const names: string[] = [];
  const unreadable: string[] = [];
  for (const p of plugins) {
    try {
      const raw = JSON.parse(readPluginFile(p.path, "manifest.json", MAX_MANIFEST_BYTES).toString("utf8")) as { commands?: unknown };
      if (Array.isArray(raw.commands)) for (const c of raw.commands) if (typeof c?.name === "string") names.push(c.name);
    } catch {
      unreadable.push(p.folder);
    }
  }
  return { names, unreadable };
}

export function readManifest(path: string, folder: string): Manifest {
  let raw: unknown;
  try {
    raw = JSON.parse(readPluginFile(path, "manifest.json", MAX_MANIFEST_BYTES).toString("utf8"));
  } catch (err) {
    if (err instanceof PluginLoadError) throw err;
    throw new PluginLoadError(`manifest.json: ${(err as Error).message}`);
  }
  const manifest = parseManifest(raw, "manifest.json");
  if (manifest.name !== folder) throw new PluginLoadError(`manifest name "${manifest.name}" does not match its folder "${folder}"`);
  return manifest;
}

const USER_FUNCTIONS = new Set<string>([...HOST_FUNCTION_NAMES, ...SANDBOX_FUNCTION_NAMES]);

/** A plugin's compiled module, and how to make its rewindable variant when one was asked for (see compilePlugin). */
export interface CompiledPlugin {
  module: WebAssembly.Module;
  /**
   * Makes the module rewindable for `rewind` (runtime/sandbox/rewind.ts): seconds of Binaryen for
   * some modules, so the caller runs it after the load, not in it.
   */
  makeRewindable?: () => Promise<WebAssembly.Module>;
}

/**
 * Reads, checks and compiles plugin.wasm for the given memory cap; with `rewind` (the async host
 * functions it was granted, "module.name", on a runtime without JSPI), the way to its rewindable
 * variant too.
 */
export async function compilePlugin(path: string, manifest: Manifest, limits: SandboxLimits, rewind?: readonly string[]): Promise<CompiledPlugin> {
  const file = join(path, "plugin.wasm");
  // build.mjs leaves this (and no plugin.wasm) after a failed build: say so instead of "missing".
  const buildError = join(path, "plugin.build-error");
  if (existsSync(buildError)) {
    const text = readPluginFile(path, "plugin.build-error", MAX_MANIFEST_BYTES).toString("utf8").trim().split("\n").slice(0, 6).join(" | ");
    throw new PluginLoadError(`the last build failed: ${text.slice(0, 600)}`);
  }
  // `plugins build NAME` builds it wherever plugins.dir is (npm run build:plugins: plugins-wasm/ only).
  if (!existsSync(file)) throw new PluginLoadError(`plugin.wasm is missing (build it: ${INVOKED_AS} plugins build ${basename(path)})`);
  // Not WebAssembly.validate: it holds the server's thread as long as V8 takes (seconds, for some
  // modules of a few KB); instrument() reads the module under limits first, and compiling it, off
  // the thread, validates it.
  const bytes = new Uint8Array(readPluginFile(path, "plugin.wasm", MAX_MODULE_BYTES));
  let module: WebAssembly.Module;
  // Modules from WASI toolchains get hookbox's capability-free WASI (see WASI_SANDBOX_MODULE).
  let renamed: Uint8Array<ArrayBuffer> | undefined;
  // An output set through the kernel is one block: the operator may allow one above the default cap.
  const opts = { memoryPages: limits.memoryPages, blockBytes: Math.max(KERNEL_BLOCK_BYTES, limits.maxOutputBytes + 1024) };
  try {
    renamed = adaptWasiModule(bytes, WASI_MODULE, WASI_SANDBOX_MODULE);
    module = await compileInstrumented(renamed, opts);
  } catch (err) {
    if (err instanceof InstrumentError) throw new PluginLoadError(`plugin.wasm: ${err.message}`);
    if (err instanceof WasmFormatError) throw new PluginLoadError(`plugin.wasm is not a valid WebAssembly module (${err.message})`);
    throw err;
  }
  const refused = refusedImport(module);
  if (refused) throw new PluginLoadError(`plugin.wasm ${refused}`);
  for (const imp of WebAssembly.Module.imports(module)) {
    const ok =
      imp.module === KERNEL_MODULE ||
      (imp.module === HOST_MODULE && USER_FUNCTIONS.has(imp.name)) ||
      (imp.module === WASI_SANDBOX_MODULE && WASI_FUNCTION_NAMES.has(imp.name)) ||
      imp.module === "hookbox:fuel";
    if (imp.module === WASI_SANDBOX_MODULE && !ok) throw new PluginLoadError(`plugin.wasm imports "${WASI_MODULE}" "${imp.name}", which is not WASI preview 1`);
    if (!ok) throw new PluginLoadError(`plugin.wasm imports unknown host function "${imp.module}" "${imp.name}"${suggest(imp.name, [...USER_FUNCTIONS])}`);
  }
  // Functions only: a global (or memory, table) exported under a hook's name is not its handler.
  const exports = new Set(WebAssembly.Module.exports(module).filter((e) => e.kind === "function").map((e) => e.name));
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
  if (!rewind || rewind.length === 0) return { module };
  const given = renamed;
  return { module, makeRewindable: () => compileInstrumented(given, opts, rewind) };
}
