// `hookbox plugins new NAME [--lang as|rust|c]`: a new plugin folder made from the example plugin of
// that language (plugins-wasm/hello-as, hello-rust, hello-c: built and tested in this repo), renamed.
// Its command is /NAME (hyphens become underscores: AssemblyScript cannot export hyphenated names).
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { makeDirs } from "../util/make-dirs.ts";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as v from "valibot";
import { PluginName } from "../config.ts";
import { AppError } from "../errors.ts";

export const SCAFFOLD_LANGS = { as: "plugin.ts", rust: "plugin.rs", c: "plugin.c" } as const;
export type ScaffoldLang = keyof typeof SCAFFOLD_LANGS;

const EXAMPLES = fileURLToPath(new URL("../../plugins-wasm", import.meta.url));
export const BUILD_SCRIPT = join(EXAMPLES, "build.mjs");

export interface Scaffolded {
  path: string;
  command: string;
  files: string[];
}

/** What is wrong with `name` as a new plugin's name, or undefined. */
export const pluginNameProblem = (name: string): string | undefined => {
  // The schema's own reason: a name of the right letters can still be reserved ("constructor").
  const checked = v.safeParse(PluginName, name);
  return checked.success ? undefined : `"${name}" is not a plugin name: ${checked.issues[0].message}`;
};

export function scaffoldPlugin(pluginsDir: string, name: string, lang: ScaffoldLang): Scaffolded {
  const problem = pluginNameProblem(name);
  if (problem) throw new AppError(400, "bad_request", problem);
  const path = resolve(pluginsDir, name);
  if (existsSync(path)) throw new AppError(409, "conflict", `${path} already exists`);
  const example = join(EXAMPLES, `hello-${lang}`);
  const exampleCommand = `hello_${lang}`;
  const command = name.replace(/-/g, "_");
  const manifest = JSON.parse(readFileSync(join(example, "manifest.json"), "utf8"));
  manifest.name = name;
  manifest.version = "0.1.0";
  manifest.description = `${name}: a hookbox plugin (${lang}), made by hookbox plugins new`;
  manifest.commands = [{ name: command, description: `what /${command} does` }];
  const source = SCAFFOLD_LANGS[lang];
  const code = readFileSync(join(example, source), "utf8").split(exampleCommand).join(command);
  makeDirs(path);
  writeFileSync(join(path, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
  writeFileSync(join(path, source), code);
  return { path, command, files: ["manifest.json", source] };
}

/** Runs plugins-wasm/build.mjs on plugin folders (in a child process of the same runtime). */
/** `notFound`: an argument named no plugin (build.mjs exits 2 then, before building anything). */
export function buildPlugins(paths: string[]): { ok: boolean; notFound: boolean; output: string } {
  const deno = (globalThis as { Deno?: unknown }).Deno !== undefined;
  const args = deno ? ["run", "-A", BUILD_SCRIPT, ...paths] : [BUILD_SCRIPT, ...paths];
  const r = spawnSync(process.execPath, args, { encoding: "utf8" });
  const output = `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? r.error.message : ""}`.trim();
  return { ok: r.status === 0, notFound: r.status === 2, output };
}
