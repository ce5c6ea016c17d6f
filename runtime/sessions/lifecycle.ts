// The session lifecycle hooks, emitted one way wherever a session starts or ends: create, /end,
// /reset and a rotating compaction (which ends one session and starts its successor).
import type { CoreContext } from "../context.ts";
import { sourceOf, type SessionRow } from "./view.ts";

type Hooks = Pick<CoreContext, "dispatcher" | "model">;

/** on_session_start for the session `row` (its profile, platform and source). */
export async function emitSessionStart(ctx: Hooks, row: SessionRow): Promise<void> {
  await ctx.dispatcher.emit("on_session_start", { session_id: row.id, profile: row.profile, platform: row.platform, source: sourceOf(row), model: ctx.model });
}

/** on_session_end, then on_session_finalize. */
export async function emitSessionEnd(ctx: Hooks, id: string, reason: string): Promise<void> {
  await ctx.dispatcher.emit("on_session_end", { session_id: id, reason });
  await ctx.dispatcher.emit("on_session_finalize", { session_id: id });
}
