// How a session row is shown to API clients and CLI users.
import type { Selectable } from "kysely";
import type { SessionsTable, MessagesTable } from "../storage/schema.ts";
import type { Source } from "../../hooks/catalogue.ts";

export type SessionRow = Selectable<SessionsTable>;
export type MessageRow = Selectable<MessagesTable>;

export const sourceOf = (r: SessionRow): Source => ({ user_id: r.user_id, chat_id: r.chat_id, thread_id: r.thread_id });

export function sessionView(r: SessionRow) {
  return {
    id: r.id,
    profile: r.profile,
    platform: r.platform,
    source: sourceOf(r),
    parent_session_id: r.parent_session_id,
    compacted_from: r.compacted_from,
    archived: r.archived === 1,
    ended_at: r.ended_at,
    end_reason: r.end_reason,
    token_estimate: r.token_estimate,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

export function messageView(m: MessageRow) {
  return { seq: m.seq, role: m.role, content: m.content, tool_name: m.tool_name, tokens: m.tokens, created_at: m.created_at };
}
