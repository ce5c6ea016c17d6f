// `hookbox sessions list|show|messages|delete|archive|unarchive|sweep ...`, `hookbox compress` and
// `hookbox turn`: the operator's hands on the same services the HTTP API uses.
import { Option, type Command } from "commander";
import { sql } from "kysely";
import { COMPACTION_KINDS, type CompactionKind } from "../../hooks/catalogue.ts";
import type { Core } from "../core.ts";
import { AppError } from "../errors.ts";
import { sqlJson } from "../storage/sql-json.ts";
import type { RemoveResult } from "../deletion/service.ts";
import type { SweepName, SweepParams } from "../maintenance/sweeps.ts";
import { pageCursor } from "../sessions/service.ts";
import { messageView, sessionView } from "../sessions/view.ts";
import { ageInDays, positiveNumber, sessionId, sessionIds, wholeNumber, type CliContext } from "./context.ts";
import { printable } from "../util/printable.ts";
import { TurnMessageText } from "../http/sessions.ts";
import { check, Profile } from "../http/validate.ts";

export function registerSessionCommands(program: Command, ctx: CliContext): void {
  const { io } = ctx;
  const sessions = program.command("sessions").description("list, inspect, delete, archive and sweep sessions");

  sessions
    .command("list")
    .description("list sessions, oldest first (the API's order: created_at, then id)")
    .option("--profile <profile>", "only this profile")
    .addOption(new Option("--archived <bool>", "only archived (true) or active (false) sessions").choices(["true", "false"]))
    .option("--limit <n>", "at most this many", wholeNumber(1, 1000), 100)
    .option("--after <cursor>", "the page after this cursor (printed after a full page) or session id")
    .option("--json", "print JSON")
    .action(async (o: { profile?: string; archived?: string; limit: number; after?: string; json?: boolean }) => {
      // The profile rule of GET /v1/sessions?profile= (a bad name listed nothing, with exit 0).
      if (o.profile !== undefined) check(Profile, o.profile, "--profile", "invalid_query");
      const core = await ctx.core();
      const rows = await core.sessions.list({ profile: o.profile, archived: o.archived === undefined ? undefined : o.archived === "true", limit: o.limit, after: o.after });
      if (o.json) io.out(JSON.stringify(rows.map(sessionView)));
      else for (const r of rows) io.out(`${r.id}\t${r.profile}\t${r.platform}\t${r.archived ? "archived" : r.ended_at !== null ? "ended" : "active"}\t${r.token_estimate} tokens`);
      // A full page may have more after it: say how to get it (on stderr, so --json stays parseable).
      if (rows.length === o.limit) io.err(`more sessions may follow: --after ${pageCursor(rows.at(-1)!)}`);
    });

  sessions
    .command("show")
    .description("print one session (JSON)")
    .argument("<id>", "session id", sessionId)
    .action(async (id: string) => io.out(JSON.stringify(sessionView(await (await ctx.core()).sessions.get(id)), null, 2)));

  sessions
    .command("messages")
    .description("print a session's messages in order")
    .argument("<id>", "session id", sessionId)
    .option("--limit <n>", "only the last n messages", wholeNumber(1, 10_000))
    .option("--json", "print JSON")
    .action(async (id: string, o: { limit?: number; json?: boolean }) => {
      const rows = (await (await ctx.core()).sessions.messages(id, o.limit)).map(messageView);
      if (o.json) io.out(JSON.stringify(rows));
      else for (const m of rows) io.out(`${m.seq}\t${m.role}${m.tool_name ? `(${m.tool_name})` : ""}\t${printable(m.content)}`);
    });

  for (const action of ["delete", "archive"] as const) {
    sessions
      .command(action)
      .description(action === "delete" ? "delete sessions (their child sessions and compaction chain go with them)" : "archive sessions")
      .argument("<ids...>", 'session ids, or "-" to read them from standard input (separated by spaces or lines: more than a command line holds)', sessionIds)
      .action(async (given: string[]) => {
        const ids = given.length === 1 && given[0] === "-" ? await idsFromStdin(ctx) : given;
        if (ids.length === 0) throw ctx.usage("no session ids on standard input");
        const core = await ctx.core();
        await requireExisting(core, ids);
        const res = await core.deletion.remove({ reason: action, ids });
        // Checked a moment ago, gone now: another process deleted them in between.
        if (action === "delete" && !res.fired) throw new AppError(404, "not_found", `already deleted (by another process meanwhile): ${ids.join(", ")}`);
        for (const id of res.deleted_ids) io.out(`${action === "delete" ? "deleted" : "archived"} ${id}`);
        // An archive is a no-op for one already archived, as over HTTP ({archived: false}): said, exit 0.
        if (action === "archive") {
          const flipped = new Set(res.deleted_ids);
          const unflipped = [...new Set(ids)].filter((id) => !flipped.has(id));
          // One set-based read, as requireExisting's (ids from standard input may be many).
          const present = new Set((await core.storage.db.selectFrom("sessions").select("id").where("id", "in", idIn(unflipped)).execute()).map((r) => r.id));
          const gone = unflipped.filter((id) => !present.has(id));
          for (const id of unflipped) if (present.has(id)) io.out(`already archived ${id}`);
          if (gone.length > 0) throw new AppError(404, "not_found", `deleted by another process meanwhile: ${gone.join(", ")}`);
        }
      });
  }

  sessions
    .command("unarchive")
    .description("bring archived sessions back")
    .argument("<ids...>", "session ids", sessionIds)
    .action(async (ids: string[]) => {
      const core = await ctx.core();
      await requireExisting(core, ids);
      // A no-op for one that is not archived, as over HTTP ({unarchived: false}) and as archive: said, exit 0.
      for (const id of new Set(ids)) io.out(`${(await core.sessions.unarchive(id)).unarchived ? "unarchived" : "not archived"} ${id}`);
    });

  registerSweeps(sessions.command("sweep").description("maintenance sweeps; --dry-run lists what would go"), ctx);

  program
    .command("compress")
    .description("compact a session's stored conversation")
    .argument("<id>", "session id", sessionId)
    .addOption(new Option("--kind <kind>", "how to compact").choices(COMPACTION_KINDS).default("summarize"))
    .option("--rotate", "summarize into a new session (kind summarize only)")
    .action(async (id: string, o: { kind: CompactionKind; rotate?: boolean }) => {
      if (o.rotate && o.kind !== "summarize") throw ctx.usage("--rotate applies to --kind summarize only");
      const out = await (await ctx.core()).compaction.compact({ session_id: id, kind: o.kind, reason: "manual", rotate: o.rotate === true });
      io.out(
        out.compacted
          ? `compacted ${out.before_tokens} -> ${out.after_tokens} tokens (${out.kind}) session ${out.session_id}`
          : `nothing compacted (${out.skipped}): ${out.detail ?? out.skipped}`,
      );
    });

  program
    .command("turn")
    .description("run one turn (or /command) in a session and print the answer")
    .argument("<id>", "session id", sessionId)
    .argument("<message...>")
    .option("--json", "print the whole turn result as JSON")
    // A command's own flags are part of the message: `turn ID /exit --delete`, `/compress --rotate`.
    .allowUnknownOption()
    .action(async (id: string, words: string[], o: { json?: boolean }) => {
      // The same rules as POST /v1/sessions/:id/turns (not empty, at most 100,000 characters).
      const message = check(TurnMessageText, words.join(" "), "message", "invalid_message");
      const res = await (await ctx.core()).turns.run(id, message);
      if (o.json) io.out(JSON.stringify(res, null, 2));
      else io.out(printable(res.type === "reply" ? res.reply : res.output, true));
    });
}

/** Most missing ids a refusal names (the rest are counted). */
const MISSING_NAMED = 20;

/** `id in` this list, as one JSON text, not a variable per id: SQLite takes at most 32,766 (ids from stdin pass that). */
const idIn = (ids: readonly string[]) => sql<string>`(select value from json_each(${sqlJson(ids)}))`;

/** delete/archive/unarchive name every id that does not exist, and then do nothing at all. */
async function requireExisting(core: Core, ids: string[]): Promise<void> {
  const found = new Set((await core.storage.db.selectFrom("sessions").select("id").where("id", "in", idIn(ids)).execute()).map((r) => r.id));
  const missing = [...new Set(ids.filter((id) => !found.has(id)))];
  // Worded as every other command and the API say it ("session ID not found").
  // ... and that nothing was done to the others (an operator took the refusal for a partial delete).
  const none = ids.length > missing.length ? "; nothing was done to the others" : "";
  const more = missing.length > MISSING_NAMED ? ` and ${missing.length - MISSING_NAMED} more` : "";
  if (missing.length) throw new AppError(404, "not_found", `${missing.length === 1 ? `session ${missing[0]} not found` : `sessions not found: ${missing.slice(0, MISSING_NAMED).join(", ")}${more}`}${none}`);
}

function registerSweeps(sweep: Command, ctx: CliContext): void {
  const { io } = ctx;
  const print = (res: RemoveResult & { dry_run?: boolean }, name: string, dry: boolean) => {
    for (const id of res.deleted_ids) io.out(`${dry ? "would delete" : "deleted"} ${id}`);
    io.out(`${name}: ${res.deleted_ids.length} ${dry ? "would be deleted (dry run, nothing changed)" : "deleted"}`);
  };
  const dryRun = ["--dry-run", "list what would be removed; change nothing"] as const;

  // Each delete sweep: its own subcommand with only the option it takes (anything else is refused).
  const SWEEPS: Array<{ name: SweepName; what: string; option?: [flag: string, help: string, param: keyof SweepParams] }> = [
    { name: "empty_sweep", what: "delete sessions without messages or children, older than a grace period", option: ["--grace-seconds <n>", "only sessions at least this old (default 3600)", "grace_seconds"] },
    { name: "prune", what: "delete sessions not updated for retention.prune_after_days", option: ["--older-than-days <n>", "override retention.prune_after_days", "older_than_days"] },
    { name: "ghost_prune", what: "delete sessions whose parent or compaction predecessor is gone" },
    { name: "profile_repair", what: "delete sessions with a blank profile or another profile than their parent" },
  ];
  for (const { name, what, option } of SWEEPS) {
    const cmd = sweep.command(name).description(what);
    // prune's age must be at least an hour: at 0 (or 1e-300) it would delete every session.
    const opt = option && new Option(option[0], option[1]).argParser(name === "prune" ? ageInDays : positiveNumber(true));
    if (opt) cmd.addOption(opt);
    cmd.option(...dryRun).action(async (o: { dryRun?: boolean } & Record<string, number | undefined>) => {
      const params: SweepParams = option && opt ? { [option[2]]: o[opt.attributeName()] } : {};
      const res = await (await ctx.core()).maintenance.sweep(name, params, { dryRun: o.dryRun === true });
      print(res, name, o.dryRun === true);
    });
  }
  sweep
    .command("idle_archive")
    .description("archive sessions idle for retention.idle_archive_after_days (no hook fires)")
    .option("--older-than-days <n>", "override retention.idle_archive_after_days", ageInDays)
    .option(...dryRun)
    .action(async (o: { olderThanDays?: number; dryRun?: boolean }) => {
      const core = await ctx.core();
      // Off unless a number of days is set (here or in the config): said, not reported as "0 archived".
      if ((o.olderThanDays ?? core.config.retention.idle_archive_after_days) <= 0) {
        io.out("idle_archive: off (retention.idle_archive_after_days is 0); --older-than-days N runs it once");
        return;
      }
      const ids = await core.maintenance.idleArchive(o.olderThanDays, { dryRun: o.dryRun === true });
      for (const id of ids) io.out(`${o.dryRun ? "would archive" : "archived"} ${id}`);
      io.out(`idle_archive: ${ids.length} ${o.dryRun ? "would be archived (dry run, nothing changed)" : "archived"}`);
    });
}

/** Session ids read from standard input to its end: words separated by spaces or lines. */
async function idsFromStdin(ctx: CliContext): Promise<string[]> {
  let text = "";
  for await (const chunk of process.stdin) text += String(chunk);
  const ids = text.split(/\s+/).filter((id) => id !== "");
  for (const id of ids) {
    try {
      sessionId(id);
    } catch (err) {
      throw ctx.usage(`${JSON.stringify(id.slice(0, 140))} on standard input is ${(err as Error).message}`);
    }
  }
  return ids;
}
