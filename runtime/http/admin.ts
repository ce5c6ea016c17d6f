// /v1/maintenance, /v1/plugins, /v1/hooks and /v1/commands.
import { Hono } from "hono";
import * as v from "valibot";
import { describeHooks } from "../../hooks/catalogue.ts";
import type { Core } from "../core.ts";
import { MAX_AGE_DAYS, MIN_AGE_DAYS, PluginName, PruneAge } from "../config.ts";
import { AppError } from "../errors.ts";
import { suggest } from "../util/suggest.ts";
import { SWEEP_NAMES } from "../maintenance/sweeps.ts";
import { sourceOf } from "../sessions/view.ts";
import { Id, QueryInt, check, noQuery, readBody, readQuery } from "./validate.ts";
import { MAX_LOG_SEQ } from "../plugins/logs.ts";

const Days = v.pipe(v.number(), v.minValue(0), v.maxValue(MAX_AGE_DAYS));
const DryRun = v.optional(v.boolean());
export const MAINTENANCE = {
  empty_sweep: v.strictObject({ grace_seconds: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(31_536_000))), dry_run: DryRun }),
  prune: v.strictObject({ older_than_days: v.optional(v.pipe(Days, PruneAge)), dry_run: DryRun }),
  ghost_prune: v.strictObject({ dry_run: DryRun }),
  profile_repair: v.strictObject({ dry_run: DryRun }),
  idle_archive: v.strictObject({ older_than_days: v.optional(v.pipe(Days, v.minValue(MIN_AGE_DAYS, "must be at least 1 hour (1/24 = 0.0417 days): less would archive every session"))), dry_run: DryRun }),
  hygiene: v.strictObject({}),
} as const;
const Task = v.picklist(Object.keys(MAINTENANCE) as Array<keyof typeof MAINTENANCE>);
/** GET /v1/plugins/:name/logs: entries after seq `since` (for tailing), newest `limit`. */
export const LogsQuery = v.strictObject({ since: v.optional(QueryInt(0, MAX_LOG_SEQ)), limit: v.optional(QueryInt(1, 1000)) });
export const CommandName = v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9_-]{0,63}$/i, "command names are [a-z0-9_-]"));
// The caller's identity (source, platform) is the session's: a body that could claim them could
// claim another user's and pass plugins.command_users. Without a session a command runs anonymous.
const FROM_SESSION = "identity comes from the session named by session_id; a request body cannot set it";
export const CommandBody = v.strictObject({
  // As a turn's text: a NUL refused, a lone surrogate made U+FFFD (a command given the same words by
  // either way sees the same arguments).
  raw_args: v.optional(v.pipe(v.string(), v.maxLength(10_000), v.check((a) => !a.includes("\u0000"), "a NUL character (U+0000) cannot be stored"), v.transform((a) => a.toWellFormed())), ""),
  session_id: v.optional(Id),
  platform: v.optional(v.never(FROM_SESSION)),
  source: v.optional(v.never(FROM_SESSION)),
});

/** 404 for a plugin name: a typo's suggestion, else where plugins come from and when they are read. */
const pluginNotFound = (core: Core, name: string) => {
  const hint = suggest(name, core.plugins.list().map((p) => p.name));
  // Said as a fact whether or not this server watches (a removed folder under --watch was told to use --watch).
  return new AppError(404, "not_found", `plugin ${name} not found${hint || `: no such folder in ${core.config.plugins.dir} when it was last read (at start, and continually under serve --watch)`}`);
};

export function adminRoutes(core: Core): Hono {
  const app = new Hono();

  app.post("/maintenance/:task", async (c) => {
    const task = check(Task, c.req.param("task"), "maintenance task", "invalid_task");
    if ((SWEEP_NAMES as readonly string[]).includes(task)) {
      const { dry_run, ...params } = (await readBody(c, MAINTENANCE[task])) as { dry_run?: boolean };
      const res = await core.maintenance.sweep(task as (typeof SWEEP_NAMES)[number], params, { dryRun: dry_run === true });
      return c.json(dry_run ? { task, would_delete_ids: res.deleted_ids, dry_run: true } : { task, deleted_ids: res.deleted_ids, fired: res.fired });
    }
    if (task === "idle_archive") {
      const body = await readBody(c, MAINTENANCE.idle_archive);
      const ids = await core.maintenance.idleArchive(body.older_than_days, { dryRun: body.dry_run === true });
      return c.json(body.dry_run ? { task, would_archive_ids: ids, dry_run: true } : { task, archived_ids: ids });
    }
    await readBody(c, MAINTENANCE.hygiene);
    return c.json({ task, compactions: await core.maintenance.hygiene() });
  });

  app.get("/hooks", (c) => (noQuery(c), c.json({ hooks: describeHooks() })));

  app.get("/plugins", (c) => (noQuery(c), c.json({ plugins: core.plugins.list() })));
  app.get("/plugins/:name", (c) => {
    const name = check(PluginName, c.req.param("name"), "plugin name", "invalid_id");
    noQuery(c);
    const info = core.plugins.get(name);
    if (!info) throw pluginNotFound(core, name);
    return c.json({ plugin: info });
  });
  app.get("/plugins/:name/logs", (c) => {
    const name = check(PluginName, c.req.param("name"), "plugin name", "invalid_id");
    const q = readQuery(c, LogsQuery);
    const entries = core.plugins.logs(name, q.since, q.limit);
    if (!entries) throw pluginNotFound(core, name);
    return c.json({ plugin: name, logs: entries });
  });
  app.post("/plugins/:name/:action", async (c) => {
    const name = check(PluginName, c.req.param("name"), "plugin name", "invalid_id");
    const action = check(v.picklist(["enable", "disable"]), c.req.param("action"), "plugin action", "invalid_action");
    await readBody(c, v.strictObject({}));
    if (!core.plugins.get(name)) throw pluginNotFound(core, name);
    const info = action === "enable" ? await core.plugins.enable(name) : await core.plugins.disable(name);
    return c.json({ plugin: info });
  });

  app.get("/commands", (c) => (noQuery(c), c.json({ commands: core.commands.list() })));
  app.post("/commands/:name", async (c) => {
    const name = check(CommandName, c.req.param("name"), "command name", "invalid_id").toLowerCase();
    const body = await readBody(c, CommandBody);
    const session = body.session_id !== undefined ? await core.sessions.get(body.session_id) : undefined;
    // A command for an ended session is refused as a turn there is (TurnService.run).
    if (session && session.ended_at !== null) throw await core.sessions.endedConflict(session);
    const output = await core.commands.run(name, body.raw_args, {
      session_id: session?.id ?? null,
      platform: session?.platform ?? null,
      source: session ? sourceOf(session) : null,
    });
    if (session) await core.sessions.markUsedByCommand(session.id); // used: see TurnService.run
    return c.json({ command: name, output });
  });

  return app;
}
