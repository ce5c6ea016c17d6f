// Seeds cascade-shaped session trees straight into libSQL (through core.storage.write, the one write
// path): each seed root has a child session, a rotated successor (compaction chain) and a child of
// that successor, every session two messages and the root one session-scoped KV row. Deleting the
// roots removes all of it through the cascade, so `total` sessions go per bulk delete.
import type { Insertable } from "kysely";
import type { Core } from "../../runtime/core.ts";
import type { SessionsTable } from "../../runtime/storage/schema.ts";

export const SESSIONS_PER_TREE = 4;
const CHUNK = 500; // rows per INSERT: well under SQLite's bound-variable limit

let serial = 0;

/** Inserts `total` sessions (total / 4 trees); returns the root ids to delete. */
export async function seedTrees(core: Core, total: number, profile = "bench"): Promise<string[]> {
  const trees = Math.max(1, Math.floor(total / SESSIONS_PER_TREE));
  const now = core.now();
  const run = ++serial;
  const sessions: Array<Insertable<SessionsTable>> = [];
  const roots: string[] = [];
  for (let t = 0; t < trees; t++) {
    const id = (k: string) => `b${run}_${t}_${k}`;
    const base = { profile, platform: "bench", user_id: "u", chat_id: `c${t}`, thread_id: null, created_at: now, updated_at: now };
    roots.push(id("root"));
    sessions.push(
      { ...base, id: id("root"), parent_session_id: null, compacted_from: null, ended_at: now, end_reason: "compacted" },
      { ...base, id: id("child"), parent_session_id: id("root"), compacted_from: null, ended_at: null, end_reason: null },
      { ...base, id: id("next"), parent_session_id: null, compacted_from: id("root"), ended_at: null, end_reason: null },
      { ...base, id: id("nextchild"), parent_session_id: id("next"), compacted_from: null, ended_at: null, end_reason: null },
    );
  }
  const messages = sessions.flatMap((s) => [
    { session_id: s.id, seq: 1, role: "user", content: `hello from ${s.id}`, tool_name: null, tokens: 6, created_at: now },
    { session_id: s.id, seq: 2, role: "assistant", content: `an answer for ${s.id}`, tool_name: null, tokens: 7, created_at: now },
  ]);
  const kv = roots.map((id) => ({ plugin: "bench-seed", session_id: id, key: "note", value: "1", updated_at: now }));
  await core.storage.write(async (trx) => {
    for (let i = 0; i < sessions.length; i += CHUNK) await trx.insertInto("sessions").values(sessions.slice(i, i + CHUNK)).execute();
    for (let i = 0; i < messages.length; i += CHUNK) await trx.insertInto("messages").values(messages.slice(i, i + CHUNK)).execute();
    for (let i = 0; i < kv.length; i += CHUNK) await trx.insertInto("plugin_kv").values(kv.slice(i, i + CHUNK)).execute();
  });
  return roots;
}
