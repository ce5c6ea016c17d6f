// `hookbox plugins call NAME HOOK [--payload FILE|-]`, `hookbox plugins call NAME command CMD ARGS` and
// `hookbox plugins call NAME tool TOOL [--payload FILE|-]` (the tool's arguments, checked against its schema):
// one call of one plugin on a temporary database, with the plugin's real sandbox, limits and host
// API, reported as output, fuel, time, KV writes and the plugin's log. The plugin runs whether or
// not plugins.enabled lists it; it gets the operator's grants for it, or (none configured) what its
// manifest requests, and the report says which.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as v from "valibot";
import { HOOK_NAMES, isHookName, payloadSchema, SCHEMA_VERSION, type HookName } from "../../hooks/catalogue.ts";
import { PluginCallError } from "../../hooks/failures.ts";
import type { Config } from "../config.ts";
import { createCore } from "../core.ts";
import { printable } from "../util/printable.ts";
import { AppError } from "../errors.ts";
import { suggest } from "../util/suggest.ts";
import { describeIssue } from "../util/schema-walk.ts";
import { readManifest, scanPluginDir } from "./loader.ts";
import type { PluginLogEntry } from "./logs.ts";
import { startPluginHost, type PluginManager } from "./manager.ts";
import { ownValue } from "../util/own.ts";

export type CallTarget =
  | { kind: "hook"; hook: string; payload: string }
  | { kind: "command"; command: string; rawArgs: string }
  | { kind: "tool"; tool: string; args: string };

export interface CallReport {
  plugin: string;
  export: string;
  granted: string[];
  grants_from: "config" | "manifest";
  ok: boolean;
  output: string | null;
  /** The failure kind and message when !ok. */
  failure: { kind: string; message: string } | null;
  fuel: number | null;
  ms: number;
  /** Payload fields that do not match the hook's schema (the call is made anyway). */
  payload_warnings: string[];
  kv_writes: Array<{ session_id: string; key: string; value: string }>;
  logs: PluginLogEntry[];
}

const notFound = (message: string) => new AppError(404, "not_found", message);

export async function callPlugin(config: Config, name: string, target: CallTarget): Promise<CallReport> {
  const folders = scanPluginDir(config.plugins.dir);
  const folder = folders.find((f) => f.folder === name);
  if (!folder) throw notFound(`no plugin named ${name} in ${config.plugins.dir}${suggest(name, folders.map((f) => f.folder))}`);
  const manifest = readManifest(folder.path, name);
  const configured = ownValue(config.plugins.grants, name);
  const granted = configured ?? manifest.capabilities;

  let fn: string;
  let input: string;
  let toolArgs: Record<string, unknown> | undefined;
  const payload_warnings: string[] = [];
  if (target.kind === "hook") {
    const { hook } = target;
    if (!isHookName(hook)) throw new AppError(400, "bad_request", `unknown hook "${hook}"${suggest(hook, HOOK_NAMES)}`);
    if (!manifest.hooks.includes(hook)) {
      throw new AppError(400, "bad_request", `${name} does not subscribe to ${hook} (its hooks: ${manifest.hooks.join(", ") || "none"})`);
    }
    const full = { hook, schema_version: SCHEMA_VERSION, ...jsonObject(target.payload, "payload") };
    // Strict here: a field the hook does not have is a typo to point out (a running hook may get
    // fields a plugin does not know yet, so the catalogue's own schema lets them through).
    const schema = v.strictObject(payloadSchema(hook).entries);
    const check = v.safeParse(schema, full);
    if (!check.success) {
      for (const i of check.issues) {
        const d = describeIssue(schema, i);
        payload_warnings.push(`${d.path || "(root)"}: ${d.message}`);
      }
    }
    fn = hook;
    input = JSON.stringify(full);
  } else if (target.kind === "tool") {
    const { tool } = target;
    const names = manifest.tools.map((t) => t.name);
    if (!names.includes(tool)) throw new AppError(400, "bad_request", `${name} has no tool ${tool}${suggest(tool, names)} (its tools: ${names.join(", ") || "none"})`);
    fn = `tool_${tool}`;
    // As a turn calls it (tools/registry.ts), with the CLI standing in for the session and the call.
    toolArgs = jsonObject(target.args, "the tool's arguments");
    input = JSON.stringify({ args: toolArgs, session_id: null, turn_id: "cli", tool_call_id: "cli" });
  } else {
    const { command } = target;
    const names = manifest.commands.map((c) => c.name);
    if (!names.includes(command)) {
      throw new AppError(400, "bad_request", `${name} has no command /${command}${suggest(command, names)} (its commands: ${names.join(", ") || "none"})`);
    }
    fn = `command_${command}`;
    input = JSON.stringify({ raw_args: target.rawArgs, session_id: null, session_key: null, platform: "cli", source: null });
  }

  const dir = mkdtempSync(join(tmpdir(), "hookbox-call-"));
  const core = await createCore(
    {
      ...config,
      db_url: `file:${join(dir, "call.db")}`,
      db_auth_token: undefined,
      plugins: { ...config.plugins, enabled: [name], disabled: [], grants: { ...config.plugins.grants, [name]: [...granted] } },
    },
    // The call's database is a scratch file; the configured one stays out of the plugin's reach.
    { pluginHost: (c) => startPluginHost(c, [config.db_url]) },
  );
  try {
    const plugins = core.plugins as PluginManager;
    const info = plugins.get(name);
    if (info?.status !== "active") throw new AppError(422, "plugin_failed", `${name} did not load: ${info?.reason ?? "unknown reason"}`);
    if (target.kind === "tool") {
      // A turn refuses arguments that do not match the tool's schema before the plugin runs.
      const problem = await core.tools.check(target.tool, toolArgs!);
      if (problem) throw new AppError(400, "bad_request", `arguments do not match ${target.tool}'s parameters: ${problem}`);
    }
    let result: { output: string | undefined; fuel: number; ms: number } | undefined;
    let failure: PluginCallError | undefined;
    const t0 = performance.now();
    // A hook's output passes the check the server applies, inside the call (a refused one fails it as
    // bad_output and drops its KV writes); the report still shows the output it refused.
    let checkedOutput: string | undefined;
    const reader = target.kind === "hook" ? core.dispatcher.outputReader(target.hook as HookName) : undefined;
    const accept = reader && Object.assign((output: string | undefined) => ((checkedOutput = output), reader(output)), { ignoresOutput: false });
    try {
      result = await plugins.invoke(name, fn, input, accept);
    } catch (err) {
      if (!(err instanceof PluginCallError)) throw err;
      failure = err;
    }
    await plugins.flush();
    const kv_writes = await core.storage.db
      .selectFrom("plugin_kv")
      .select(["session_id", "key", "value"])
      .where("plugin", "=", name)
      .orderBy("session_id")
      .orderBy("key")
      .execute();
    return {
      plugin: name,
      export: fn,
      granted: [...granted],
      grants_from: configured ? "config" : "manifest",
      ok: failure === undefined,
      output: result?.output ?? checkedOutput ?? null,
      failure: failure ? { kind: failure.kind, message: failure.message } : null,
      fuel: result?.fuel ?? failure?.fuel ?? null,
      ms: result?.ms ?? performance.now() - t0,
      payload_warnings,
      kv_writes,
      logs: plugins.logs(name) ?? [],
    };
  } finally {
    await core.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function jsonObject(text: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new AppError(400, "bad_request", `${what} is not JSON: ${(err as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new AppError(400, "bad_request", `${what} must be a JSON object`);
  return value as Record<string, unknown>;
}

/** The report as lines for a terminal. */
export function formatCallReport(r: CallReport): string[] {
  const lines = [`${r.plugin} ${r.export}: ${r.ok ? "ok" : `FAILED (${r.failure!.kind}): ${printable(r.failure!.message)}`}`];
  for (const w of r.payload_warnings) lines.push(`payload warning: ${w}`);
  lines.push(`output: ${r.output === undefined || r.output === null ? "(none)" : printable(r.output)}`);
  lines.push(`fuel: ${r.fuel ?? "-"}  time: ${r.ms.toFixed(2)} ms  granted: [${r.granted.join(", ")}] (from ${r.grants_from})`);
  lines.push(`kv writes: ${r.kv_writes.length}`);
  for (const w of r.kv_writes) lines.push(`  ${w.session_id === "" ? "(plugin)" : w.session_id} ${printable(w.key)} = ${printable(w.value.length > 200 ? `${w.value.slice(0, 200)}…` : w.value)}`);
  lines.push(`logs: ${r.logs.length}`);
  for (const l of r.logs) lines.push(`  ${l.level.padEnd(5)} ${l.source.padEnd(7)} ${printable(l.message)}`);
  return lines;
}
