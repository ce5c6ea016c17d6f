// The hookbox command line:
//   hookbox serve [--host H] [--port P]
//   hookbox sessions list [--profile P] [--archived true|false] [--limit N] [--json]
//   hookbox sessions delete ID...        hookbox sessions archive ID...
//   hookbox sessions sweep empty_sweep|prune|ghost_prune|profile_repair|idle_archive
//                          [--older-than-days N] [--grace-seconds N]
//   hookbox compress ID [--kind summarize|micro_summarize|prune_tool_results|provider_native] [--rotate]
// Exit codes: 0 done, 1 failed (e.g. not found), 2 usage error.
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { COMPACTION_KINDS, type CompactionKind } from "../hooks/catalogue.ts";
import { checkBindHost, loadConfig, ConfigError, type Config } from "./config.ts";
import { createCore, type Core, type PluginHostFactory } from "./core.ts";
import { AppError } from "./errors.ts";
import { log } from "./log.ts";
import { SWEEP_NAMES, type SweepName } from "./maintenance/sweeps.ts";
import { startServer } from "./server.ts";
import { sessionView } from "./sessions/view.ts";
import { startPluginHost } from "./plugins/manager.ts";
import { pluginsArgs, PLUGINS_USAGE } from "./plugins/cli.ts";

/** The plugin runtime started with the core (serve and every CLI command, so CLI deletes reach plugins too). */
const pluginHost: PluginHostFactory | undefined = startPluginHost;

export interface CliIO {
  out(line: string): void;
  err(line: string): void;
}

class UsageError extends Error {}

const USAGE = `usage:
  hookbox serve [--host H] [--port P]
  hookbox sessions list [--profile P] [--archived true|false] [--limit N] [--json]
  hookbox sessions delete ID...
  hookbox sessions archive ID...
  hookbox sessions sweep ${[...SWEEP_NAMES, "idle_archive"].join("|")} [--older-than-days N] [--grace-seconds N]
  hookbox compress ID [--kind ${COMPACTION_KINDS.join("|")}] [--rotate]
${PLUGINS_USAGE}`;

export function buildCore(config: Config): Promise<Core> {
  return createCore(config, { pluginHost });
}

function args(argv: string[], options: NonNullable<ParseArgsConfig["options"]>) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function num(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (typeof value !== "string" || !Number.isFinite(n) || n < 0) throw new UsageError(`--${name} must be a non-negative number`);
  return n;
}

export interface CliOptions {
  config?: Config;
  /** Run against this already-open core (tests, embedding); it is left open. */
  core?: Core;
}

/** Runs one CLI command; returns the exit code. `serve` resolves when the server stops. */
export async function runCli(argv: string[], io: CliIO, opts: CliOptions = {}): Promise<number> {
  const config = opts.config ?? opts.core?.config;
  try {
    const [cmd, ...rest] = argv;
    if (cmd === undefined || cmd === "help" || cmd === "--help") {
      io.out(USAGE);
      return cmd === undefined ? 2 : 0;
    }
    if (cmd === "serve") return await serve(rest, io, config ?? loadConfig());
    if (cmd !== "sessions" && cmd !== "compress" && cmd !== "plugins") throw new UsageError(`unknown command ${cmd}`);
    const parsed =
      cmd === "compress" ? compressArgs(rest) : cmd === "plugins" ? pluginsArgs(rest, (m) => new UsageError(m)) : sessionsArgs(rest);
    const core = opts.core ?? (await buildCore(config ?? loadConfig()));
    try {
      await parsed(core, io);
      return 0;
    } finally {
      if (!opts.core) await core.close();
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`hookbox: ${err.message}\n${USAGE}`);
      return 2;
    }
    if (err instanceof AppError || err instanceof ConfigError) {
      io.err(`hookbox: ${err.message}`);
      return 1;
    }
    io.err(`hookbox: ${(err as Error).stack ?? String(err)}`);
    return 1;
  }
}

type Action = (core: Core, io: CliIO) => Promise<void>;

/** Which sweep takes which option (anything else given to it is a usage error, not silently ignored). */
const SWEEP_OPTIONS: Record<SweepName | "idle_archive", readonly string[]> = {
  empty_sweep: ["grace-seconds"],
  prune: ["older-than-days"],
  ghost_prune: [],
  profile_repair: [],
  idle_archive: ["older-than-days"],
};

function sessionsArgs(argv: string[]): Action {
  const [sub, ...rest] = argv;
  switch (sub) {
    case "list": {
      const a = args(rest, { profile: { type: "string" }, archived: { type: "string" }, limit: { type: "string" }, json: { type: "boolean" } });
      if (a.positionals.length) throw new UsageError("sessions list takes no positional arguments");
      const archived = a.values.archived;
      if (archived !== undefined && archived !== "true" && archived !== "false") throw new UsageError("--archived must be true or false");
      const limit = num(a.values.limit, "limit") ?? 100;
      if (!Number.isInteger(limit) || limit < 1) throw new UsageError("--limit must be a whole number of at least 1");
      return async (core, io) => {
        const rows = await core.sessions.list({
          profile: a.values.profile as string | undefined,
          archived: archived === undefined ? undefined : archived === "true",
          limit,
        });
        if (a.values.json) io.out(JSON.stringify(rows.map(sessionView)));
        else for (const r of rows) io.out(`${r.id}\t${r.profile}\t${r.platform}\t${r.archived ? "archived" : "active"}\t${r.token_estimate} tokens`);
      };
    }
    case "delete":
    case "archive": {
      const ids = args(rest, {}).positionals;
      if (ids.length === 0) throw new UsageError(`sessions ${sub} needs at least one ID`);
      return async (core, io) => {
        const res = await core.deletion.remove({ reason: sub === "delete" ? "delete" : "archive", ids });
        if (!res.fired) throw new AppError(404, "not_found", sub === "delete" ? "nothing to delete: no such session" : "nothing archived (missing or already archived)");
        for (const id of res.deleted_ids) io.out(`${sub === "delete" ? "deleted" : "archived"} ${id}`);
      };
    }
    case "sweep": {
      const a = args(rest, { "older-than-days": { type: "string" }, "grace-seconds": { type: "string" } });
      const [name, ...extra] = a.positionals;
      if (extra.length) throw new UsageError("sessions sweep takes one sweep name");
      if (name === undefined || !Object.hasOwn(SWEEP_OPTIONS, name)) throw new UsageError(`unknown sweep ${name ?? "(none)"}`);
      const sweep = name as keyof typeof SWEEP_OPTIONS;
      for (const option of Object.keys(a.values)) {
        if (!SWEEP_OPTIONS[sweep].includes(option)) throw new UsageError(`sweep ${sweep} does not take --${option}`);
      }
      const days = num(a.values["older-than-days"], "older-than-days");
      const grace = num(a.values["grace-seconds"], "grace-seconds");
      if (sweep === "idle_archive") {
        if (days === 0) throw new UsageError("idle_archive needs --older-than-days above 0");
        return async (core, io) => {
          for (const id of await core.maintenance.idleArchive(days)) io.out(`archived ${id}`);
        };
      }
      return async (core, io) => {
        const res = await core.maintenance.sweep(sweep, { older_than_days: days, grace_seconds: grace });
        for (const id of res.deleted_ids) io.out(`deleted ${id}`);
        io.out(`${sweep}: ${res.deleted_ids.length} deleted`);
      };
    }
    default:
      throw new UsageError(`unknown sessions subcommand ${sub ?? "(none)"}`);
  }
}

function compressArgs(argv: string[]): Action {
  const a = args(argv, { kind: { type: "string" }, rotate: { type: "boolean" } });
  const [id, ...extra] = a.positionals;
  if (!id || extra.length) throw new UsageError("compress needs exactly one session ID");
  const kind = (a.values.kind ?? "summarize") as CompactionKind;
  if (!COMPACTION_KINDS.includes(kind)) throw new UsageError(`--kind must be one of ${COMPACTION_KINDS.join(", ")}`);
  if (a.values.rotate === true && kind !== "summarize") throw new UsageError("--rotate applies to --kind summarize only");
  return async (core, io) => {
    const out = await core.compaction.compact({ session_id: id, kind, reason: "manual", rotate: a.values.rotate === true });
    io.out(out.compacted ? `compacted ${out.before_tokens} -> ${out.after_tokens} tokens (${out.kind}) session ${out.session_id}` : `nothing compacted (${out.skipped})`);
  };
}

async function serve(argv: string[], io: CliIO, base: Config): Promise<number> {
  const a = args(argv, { host: { type: "string" }, port: { type: "string" } });
  if (a.positionals.length) throw new UsageError("serve takes no positional arguments");
  const port = num(a.values.port, "port");
  if (port !== undefined && (!Number.isInteger(port) || port > 65_535)) throw new UsageError("--port must be a whole number 0-65535");
  const config: Config = { ...base, host: (a.values.host as string | undefined) ?? base.host, port: port ?? base.port };
  checkBindHost(config); // --host must not bypass the config's loopback-without-token rule
  const core = await buildCore(config);
  const server = await startServer(core, { host: config.host, port: config.port });
  io.out(`hookbox listening on ${server.url} (db ${config.db_url}, ${core.plugins.list().length} plugins)`);
  // Idle auto-archive is silent maintenance: run it hourly when configured.
  const timer =
    config.retention.idle_archive_after_days > 0
      ? setInterval(() => void core.maintenance.idleArchive().catch((e) => log("warn", "idle archive failed", { error: String(e) })), 3_600_000)
      : undefined;
  await new Promise<void>((done) => {
    const stop = () => done();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  if (timer) clearInterval(timer);
  await server.close();
  await core.close();
  return 0;
}

const isMain =
  (import.meta as { main?: boolean }).main ?? (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url));
if (isMain) {
  const code = await runCli(process.argv.slice(2), { out: (l) => console.log(l), err: (l) => console.error(l) });
  process.exit(code);
}
