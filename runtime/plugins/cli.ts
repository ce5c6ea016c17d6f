// `hookbox plugins list [--json] | enable NAME | disable NAME | reset [NAME...]`: the operator's view
// of the plugin runtime (status, reason, grants, stats) and the persisted enable/disable overrides.
// A change takes effect in this process at once and in every running server within 2 s (syncState).
// `hookbox plugins new | build | call | logs`: the plugin author's loop (scaffold.ts, call.ts).
import { INVOKED_AS } from "../cli/invoked-as.ts";
import type { Command } from "commander";
import type { CliContext } from "../cli/context.ts";
import { AppError } from "../errors.ts";
import { suggest } from "../util/suggest.ts";
import { PluginNotFoundError, type PluginInfo } from "./host.ts";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { wholeNumber } from "../cli/context.ts";
import { printable } from "../util/printable.ts";
import { callPlugin, formatCallReport, type CallTarget } from "./call.ts";
import { MAX_LOG_SEQ, type PluginLogEntry } from "./logs.ts";
import { buildPlugins, pluginNameProblem, scaffoldPlugin, SCAFFOLD_LANGS, type ScaffoldLang } from "./scaffold.ts";

/** Registers the `plugins` subcommands on `plugins` (the `hookbox plugins` command). */
export function registerPluginCommands(plugins: Command, ctx: CliContext): void {
  const { io } = ctx;
  plugins
    .command("list")
    .description("every plugin in plugins.dir with status, reason, grants and stats: a running server's with --url, else this process's (no calls yet)")
    .option("--url [url]", "ask a running server (default: http://HOST:PORT of the config)")
    .option("--json", "print JSON")
    .action(async (o: { url?: string | true; json?: boolean }) => {
      const list = o.url ? ((await fromServer(ctx, o.url, "/v1/plugins", "the stats live in the serving process")) as { plugins: PluginInfo[] }).plugins : (await ctx.core()).plugins.list();
      if (o.json) io.out(JSON.stringify({ plugins: list }, null, 2));
      else for (const p of list) io.out(describe(p));
    });
  for (const action of ["enable", "disable"] as const) {
    plugins
      .command(action)
      .description(`${action} a plugin (persisted; overrides plugins.enabled until "plugins reset"; plugins.disabled always wins)`)
      .argument("<name>")
      .action(async (name: string) => {
        const core = await ctx.core();
        try {
          io.out(describe(action === "enable" ? await core.plugins.enable(name) : await core.plugins.disable(name)));
        } catch (err) {
          if (err instanceof PluginNotFoundError) {
            throw new AppError(404, "not_found", `${err.message}${suggest(name, core.plugins.list().map((p) => p.name))}`);
          }
          throw err;
        }
      });
  }
  plugins
    .command("reset")
    .description("clear the enable/disable overrides (of NAMEs, or of all plugins): the config decides again")
    .argument("[names...]")
    .action(async (names: string[]) => {
      const core = await ctx.core();
      // A name that is neither a plugin nor has an override (one of a plugin since removed) is an
      // error, as for enable/disable: a typo cleared nothing, with exit 0.
      const stored = await core.storage.db.selectFrom("plugin_state").select("name").execute();
      const known = [...new Set([...core.plugins.list().map((p) => p.name), ...stored.map((r) => r.name)])];
      const unknown = names.find((n) => !known.includes(n));
      if (unknown !== undefined) throw new AppError(404, "not_found", `plugin ${unknown} not found${suggest(unknown, known)}`);
      // Through storage.write, like every write: the synchronous reader's next read sees it.
      const rows = await core.storage.write((trx) => {
        let q = trx.updateTable("plugin_state").set({ enabled: null }).where("enabled", "is not", null);
        if (names.length) q = q.where("name", "in", names);
        return q.returning("name").execute();
      });
      const cleared = rows.map((r) => r.name).sort();
      for (const name of cleared) io.out(`override cleared: ${name}`);
      io.out(`${cleared.length} override(s) cleared; running servers apply this within 2 s`);
    });
  registerAuthorCommands(plugins, ctx);
}

function registerAuthorCommands(plugins: Command, ctx: CliContext): void {
  const { io } = ctx;
  plugins
    .command("new")
    .description("scaffold a plugin folder (manifest + source of the language's example plugin) and build it")
    .argument("<name>")
    .option("--lang <lang>", `source language: ${Object.keys(SCAFFOLD_LANGS).join(", ")}`, "as")
    .option("--dir <dir>", "folder to create it in (default: plugins.dir)")
    .option("--no-build", "only write the files")
    .action((name: string, o: { lang: string; dir?: string; build: boolean }) => {
      const badName = pluginNameProblem(name);
      if (badName) throw ctx.usage(badName);
      if (!Object.hasOwn(SCAFFOLD_LANGS, o.lang)) throw ctx.usage(`--lang must be one of ${Object.keys(SCAFFOLD_LANGS).join(", ")}`);
      const pluginsDir = ctx.config().plugins.dir;
      const made = scaffoldPlugin(o.dir ?? pluginsDir, name, o.lang as ScaffoldLang);
      io.out(`created ${made.path} (${made.files.join(", ")}); command /${made.command}`);
      if (o.build) build(ctx, [made.path]);
      // The server and `plugins call` look in plugins.dir: a folder made elsewhere needs it pointed there.
      const elsewhere = o.dir !== undefined && resolve(o.dir) !== resolve(pluginsDir);
      const dirNote = elsewhere ? ` with plugins.dir ${resolve(o.dir!)} (it is ${pluginsDir})` : "";
      // Not built yet: the first step is the build (plugins call needs plugin.wasm).
      if (!o.build) io.out(`build it with: ${INVOKED_AS} plugins build ${made.path}`);
      io.out(`next: add "${name}" to plugins.enabled (and its capabilities to plugins.grants)${dirNote}, then try it with`);
      io.out(`  ${elsewhere ? `HOOKBOX_PLUGINS_DIR=${resolve(o.dir!)} ` : ""}${INVOKED_AS} plugins call ${name} command ${made.command} hi`);
    });
  plugins
    .command("build")
    .description("build plugin folders (paths) or plugins by name (a folder of plugins.dir, else of plugins-wasm); all of plugins.dir when none given")
    .argument("[plugins...]")
    .action((names: string[]) => {
      const dir = ctx.config().plugins.dir;
      // A name is first the plugin the server runs (plugins.dir), not a same-named one in plugins-wasm.
      const inDir = (n: string) => (!n.includes("/") && existsSync(join(dir, n, "manifest.json")) ? join(dir, n) : n);
      build(ctx, names.length ? names.map(inDir) : [dir]);
    });
  plugins
    .command("call")
    .description("one call of a plugin (a hook, `command CMD ARGS...` or `tool TOOL`) on a temporary database with its real limits; prints output, fuel, time, KV writes and logs")
    .argument("<name>", "plugin")
    .argument("<hook>", 'hook name, "command" or "tool"')
    .argument("[args...]", "for command: the command name, then its arguments; for tool: the tool name")
    .option("--payload <file>", 'hook payload fields, or a tool\'s arguments, as a JSON object, from a file or "-" for stdin (default {})')
    .option("--json", "print the report as JSON")
    .action(async (name: string, hook: string, args: string[], o: { payload?: string; json?: boolean }) => {
      let target: CallTarget;
      if (hook === "command") {
        const [command, ...rest] = args;
        if (!command) throw ctx.usage("plugins call NAME command needs the command name");
        if (o.payload !== undefined) throw ctx.usage("--payload is for hooks; a command takes its arguments after its name");
        target = { kind: "command", command, rawArgs: rest.join(" ") };
      } else if (hook === "tool") {
        const [tool, ...rest] = args;
        if (!tool) throw ctx.usage("plugins call NAME tool needs the tool name (its arguments go in --payload)");
        if (rest.length) throw ctx.usage("a tool takes its arguments as a JSON object in --payload, not after its name");
        target = { kind: "tool", tool, args: o.payload === undefined ? "{}" : await readPayload(o.payload) };
      } else {
        if (args.length) throw ctx.usage(`a hook call takes no arguments after the hook (use --payload)`);
        target = { kind: "hook", hook, payload: o.payload === undefined ? "{}" : await readPayload(o.payload) };
      }
      const report = await callPlugin(ctx.config(), name, target);
      if (o.json) io.out(JSON.stringify(report, null, 2));
      else for (const line of formatCallReport(report)) io.out(line);
      if (!report.ok) throw new AppError(422, "call_failed", `${report.export} failed (${report.failure!.kind})`);
    });
  plugins
    .command("logs")
    .description("a plugin's log ring from a running server (its log lines, stdout/stderr, failed calls)")
    .argument("<name>")
    .option("--url <url>", "the server (default: http://HOST:PORT of the config)")
    .option("--since <seq>", "only entries after this sequence number", wholeNumber(0, MAX_LOG_SEQ))
    .option("--limit <n>", "newest n entries", wholeNumber(1, 1000))
    .option("--json", "print JSON")
    .action(async (name: string, o: { url?: string; since?: number; limit?: number; json?: boolean }) => {
      const query = new URLSearchParams();
      if (o.since !== undefined) query.set("since", String(o.since));
      if (o.limit !== undefined) query.set("limit", String(o.limit));
      const path = `/v1/plugins/${encodeURIComponent(name)}/logs${query.size ? `?${query}` : ""}`;
      const body = (await fromServer(ctx, o.url ?? true, path, "the log ring lives in the serving process")) as { logs?: PluginLogEntry[] };
      if (o.json) io.out(JSON.stringify(body, null, 2));
      else for (const l of body.logs ?? []) io.out(`${l.seq} ${l.t} ${l.level.padEnd(5)} ${l.source.padEnd(7)} ${printable(l.message)}`);
    });
}

/** GET `path` of a running server (`url`, or true: the config's HOST:PORT), with the config's API token; its JSON. */
async function fromServer(ctx: CliContext, url: string | true, path: string, why: string): Promise<unknown> {
  const config = ctx.config();
  const base = url === true ? `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${config.port}` : url;
  const target = `${base.replace(/\/$/, "")}${path}`;
  let res: Response;
  try {
    res = await fetch(target, { headers: config.api_token ? { authorization: `Bearer ${config.api_token}` } : {} });
  } catch (err) {
    throw new AppError(503, "unreachable", `no hookbox server at ${base} (${(err as Error).message}); ${why}: start it with ${INVOKED_AS} serve, or pass --url`);
  }
  const body = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
  const said = body.error?.message ?? `${target}: HTTP ${res.status}`;
  // The server's token is the config's (api_token, HOOKBOX_API_TOKEN) of the process it runs as, not always this one's.
  if (res.status === 401) {
    const hint = config.api_token ? "the token this CLI sends (api_token / HOOKBOX_API_TOKEN) is not the server's" : "the server requires a token: set HOOKBOX_API_TOKEN (or api_token in the config) to the server's";
    throw new AppError(401, "unauthorized", `${said}; ${hint}`);
  }
  // A 400 is this command's bad input (exit 2, as a usage error), a 404 is "not found" (exit 1).
  if (!res.ok) throw new AppError(res.status === 404 || res.status === 400 ? res.status : 502, "request_failed", said);
  return body;
}

async function readPayload(from: string): Promise<string> {
  if (from !== "-") {
    try {
      return readFileSync(from, "utf8");
    } catch (err) {
      throw new AppError(400, "bad_request", `--payload ${from}: ${(err as Error).message}`);
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks).toString("utf8");
}

function build(ctx: CliContext, paths: string[]): void {
  const r = buildPlugins(paths);
  for (const line of r.output.split("\n")) if (line) ctx.io.out(printable(line));
  // A plugin that is not there is not found, nothing was built (it said "build failed; the plugin
  // keeps no plugin.wasm until it builds"; an outside probe).
  if (r.notFound) throw new AppError(404, "not_found", "no such plugin (see above): nothing was built");
  if (!r.ok) throw new AppError(422, "build_failed", "build failed (see above); the plugin keeps no plugin.wasm until it builds");
}

function describe(p: PluginInfo): string {
  const s = p.stats;
  const failed = s ? Object.entries(s.failures).filter(([, n]) => n > 0).map(([k, n]) => `${k}=${n}`) : [];
  const parts = [
    p.name.padEnd(20),
    p.status.padEnd(11),
    `v${p.version ?? "?"}`,
    `granted=[${p.capabilities.granted.join(",")}]${p.capabilities.ungranted.length > 0 ? ` NOT granted=[${p.capabilities.ungranted.join(",")}]` : ""}`,
    s ? `calls=${s.calls} ok=${s.ok}${failed.length ? ` failed(${failed.join(",")})` : ""} fuel=${s.fuel_used} p50=${s.latency_ms.p50}ms p99=${s.latency_ms.p99}ms` : "calls=0",
  ];
  if (p.reason) parts.push(`reason: ${p.reason}`);
  // A hook quarantined alone, and the hook that failed last: the operator sees which hook fails.
  for (const [hook, why] of Object.entries(s?.quarantined_hooks ?? {})) parts.push(`hook ${hook} quarantined: ${why}`);
  if (s?.failing_hook) parts.push(`failing hook: ${s.failing_hook}`);
  if (p.unknown_hooks.length > 0) parts.push(`unknown hooks (ignored): ${p.unknown_hooks.join(",")}`);
  if (p.unknown_fields.length > 0) parts.push(`unknown manifest fields (ignored): ${p.unknown_fields.join(", ")}`);
  return printable(parts.join("  "));
}
