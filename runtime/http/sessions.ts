// /v1/sessions: create, list, get, messages, turns, compress, archive, unarchive, end, reset,
// delete, bulk delete and profile adoption.
import { Hono } from "hono";
import * as v from "valibot";
import { COMPACTION_KINDS } from "../../hooks/catalogue.ts";
import type { Core } from "../core.ts";
import type { InFlight } from "../util/in-flight.ts";
import { notFound } from "../errors.ts";
import { pageCursor } from "../sessions/service.ts";
import { messageView, sessionView } from "../sessions/view.ts";
import { methodNotAllowedResponse } from "./errors.ts";
import { streamCommand, streamTurn, wantsEventStream } from "./turn-stream.ts";
import { parseSlash } from "../commands/registry.ts";
import { Id, Platform, Profile, QueryBool, QueryInt, SourceInput, noQuery, readBody, readId, readQuery } from "./validate.ts";

export const CreateBody = v.strictObject({
  profile: v.optional(Profile),
  platform: v.optional(Platform),
  source: v.optional(SourceInput),
  parent_session_id: v.optional(Id),
});
export const ListQuery = v.strictObject({
  profile: v.optional(Profile),
  archived: v.optional(QueryBool),
  limit: v.optional(QueryInt(1, 1000), "100"),
  after: v.optional(Id),
});
export const MessagesQuery = v.strictObject({ limit: v.optional(QueryInt(1, 10_000)) });
// A NUL is refused: the embedded database's reader ends a text at it, so the rest of the message
// would be lost to every later read (history, compaction, sessions:read), as plugin KV refuses it.
/** A turn's message, over HTTP and from the CLI alike. */
export const TurnMessageText = v.pipe(
  v.string(),
  v.minLength(1),
  v.maxLength(100_000),
  v.check((m) => !m.includes("\u0000"), "a NUL character (U+0000) cannot be stored"),
  // A lone surrogate (an unpaired "\ud800" escape) is no text: stored, it became U+FFFD while the
  // answer and the hooks had the original; now all of them see U+FFFD.
  v.transform((m) => m.toWellFormed()),
);

export const TurnBody = v.strictObject({
  message: TurnMessageText,
});
export const CompressBody = v.strictObject({ kind: v.optional(v.picklist(COMPACTION_KINDS), "summarize"), rotate: v.optional(v.boolean(), false) });
export const EndBody = v.strictObject({ reason: v.optional(v.pipe(v.string(), v.regex(/^[a-z0-9_-]{1,64}$/, "reasons are 1-64 chars of [a-z0-9_-]")), "user") });
export const Empty = v.strictObject({});
export const BulkDeleteBody = v.pipe(
  v.strictObject({ ids: v.optional(v.pipe(v.array(Id), v.maxLength(100_000))), profile: v.optional(Profile) }),
  v.check((b) => (b.ids === undefined) !== (b.profile === undefined), "give exactly one of ids or profile"),
  v.description("exactly one of ids or profile"),
);
export const AdoptBody = v.strictObject({ ids: v.pipe(v.array(Id), v.minLength(1), v.maxLength(100_000)), profile: Profile });

export function sessionRoutes(core: Core, work: InFlight): Hono {
  const app = new Hono();

  app.post("/", async (c) => {
    const body = await readBody(c, CreateBody);
    return c.json({ session: sessionView(await core.sessions.create(body)) }, 201);
  });

  app.get("/", async (c) => {
    const q = readQuery(c, ListQuery);
    const rows = await core.sessions.list({ profile: q.profile, archived: q.archived, limit: q.limit, after: q.after });
    return c.json({ sessions: rows.map(sessionView), next: rows.length === q.limit ? pageCursor(rows.at(-1)!) : null });
  });

  app.post("/bulk-delete", async (c) => {
    const body = await readBody(c, BulkDeleteBody);
    const profile = body.profile;
    const res =
      profile !== undefined
        ? await core.deletion.remove({ reason: "delete", select: async (trx) => (await trx.selectFrom("sessions").select("id").where("profile", "=", profile).execute()).map((r) => r.id) })
        : await core.deletion.remove({ reason: "delete", ids: body.ids! });
    return c.json({ deleted_ids: res.deleted_ids, fired: res.fired });
  });

  app.post("/adopt", async (c) => {
    const body = await readBody(c, AdoptBody);
    return c.json({ moved_ids: await core.sessions.adopt(body.ids, body.profile), profile: body.profile });
  });

  // Actions, not session ids: another method on them is a 405, not GET or DELETE of a session so named.
  for (const action of ["/bulk-delete", "/adopt"]) app.all(action, (c) => methodNotAllowedResponse(c, ["POST"]));

  app.get("/:id", async (c) => {
    const id = readId(c);
    noQuery(c);
    return c.json({ session: sessionView(await core.sessions.get(id)) });
  });

  app.get("/:id/messages", async (c) => {
    const id = readId(c);
    const q = readQuery(c, MessagesQuery);
    return c.json({ messages: (await core.sessions.messages(id, q.limit)).map(messageView) });
  });

  app.post("/:id/turns", async (c) => {
    const id = readId(c);
    const body = await readBody(c, TurnBody);
    if (wantsEventStream(c)) {
      // A missing session is a plain 404 and an ended one a plain 409, as for a turn not streamed;
      // what goes wrong once the turn runs is the stream's `error` event.
      const session = await core.sessions.turnSession(id);
      if (session.ended_at !== null) throw await core.sessions.endedConflict(session);
      if (parseSlash(body.message)) return streamCommand(c, core, id, body.message);
      return streamTurn(c, core, id, body.message, work);
    }
    return c.json(await core.turns.run(id, body.message));
  });

  app.post("/:id/compress", async (c) => {
    const id = readId(c);
    const body = await readBody(c, CompressBody);
    return c.json(await core.compaction.compact({ session_id: id, kind: body.kind, reason: "manual", rotate: body.rotate }));
  });

  app.post("/:id/archive", async (c) => {
    const id = readId(c);
    await readBody(c, Empty);
    const before = await core.sessions.get(id);
    const res = await core.deletion.remove({ reason: "archive", ids: [id] });
    // Deleted right after this archive (by another node, or a plugin's hook): the archive happened
    // and its hook fired, so the answer says so, with the row as it was archived.
    const session = (await core.sessions.find(id)) ?? (res.fired ? { ...before, archived: 1 } : undefined);
    if (!session) throw notFound("session", id);
    return c.json({ session: sessionView(session), archived: res.fired });
  });

  app.post("/:id/unarchive", async (c) => {
    const id = readId(c);
    await readBody(c, Empty);
    const { session, unarchived } = await core.sessions.unarchive(id);
    return c.json({ session: sessionView(session), unarchived });
  });

  app.post("/:id/end", async (c) => {
    const id = readId(c);
    const body = await readBody(c, EndBody);
    const { session, changed } = await core.sessions.end(id, body.reason);
    return c.json({ session: sessionView(session), ended: changed });
  });

  app.post("/:id/reset", async (c) => {
    const id = readId(c);
    await readBody(c, Empty);
    const fresh = await core.sessions.reset(id);
    return c.json({ session: sessionView(fresh), old_session_id: id }, 201);
  });

  app.delete("/:id", async (c) => {
    const id = readId(c);
    noQuery(c);
    const res = await core.deletion.remove({ reason: "delete", ids: [id] });
    if (!res.fired) throw notFound("session", id);
    return c.json({ deleted_ids: res.deleted_ids });
  });

  return app;
}
