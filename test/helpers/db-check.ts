// Database assertions for the reliability suites: a snapshot of every domain row (to prove a refused
// request changed nothing) and a consistency check (no orphans, token sums right, SQLite intact).
import { sql, type Kysely } from "kysely";
import type { Database } from "../../runtime/storage/schema.ts";

/**
 * Every row of the domain tables, in a stable order. The idempotency table is left out on purpose:
 * a refused request's answer is stored under its Idempotency-Key by design.
 */
export async function snapshot(db: Kysely<Database>): Promise<string> {
  const [sessions, messages, kv, state] = await Promise.all([
    db.selectFrom("sessions").selectAll().orderBy("id").execute(),
    db.selectFrom("messages").selectAll().orderBy("id").execute(),
    db.selectFrom("plugin_kv").selectAll().orderBy("plugin").orderBy("session_id").orderBy("key").execute(),
    db.selectFrom("plugin_state").selectAll().orderBy("name").execute(),
  ]);
  return JSON.stringify({ sessions, messages, kv, state });
}

const count = async (db: Kysely<Database>, query: ReturnType<typeof sql<{ n: number }>>) => Number((await query.execute(db)).rows[0]!.n);

/** Problems found in the stored data; an empty list means consistent. */
export async function inconsistencies(db: Kysely<Database>): Promise<string[]> {
  const problems: string[] = [];
  const integrity = (await sql<{ integrity_check: string }>`pragma integrity_check`.execute(db)).rows.map((r) => Object.values(r)[0]);
  if (integrity.join() !== "ok") problems.push(`integrity_check: ${integrity.join("; ")}`);
  const checks: Array<[string, ReturnType<typeof sql<{ n: number }>>]> = [
    ["messages without a session", sql`select count(*) as n from messages where session_id not in (select id from sessions)`],
    ["session KV rows without a session", sql`select count(*) as n from plugin_kv where session_id <> '' and session_id not in (select id from sessions)`],
    ["child sessions without a parent", sql`select count(*) as n from sessions where parent_session_id is not null and parent_session_id not in (select id from sessions)`],
    ["rotated sessions without a predecessor", sql`select count(*) as n from sessions where compacted_from is not null and compacted_from not in (select id from sessions)`],
    [
      "sessions whose token_estimate is not the sum of their messages",
      sql`select count(*) as n from sessions s where s.token_estimate <> coalesce((select sum(tokens) from messages m where m.session_id = s.id), 0)`,
    ],
    ["children outside their parent's profile", sql`select count(*) as n from sessions c join sessions p on p.id = c.parent_session_id where c.profile <> p.profile`],
  ];
  for (const [what, query] of checks) {
    const n = await count(db, query);
    if (n > 0) problems.push(`${n} ${what}`);
  }
  return problems;
}

export async function rowCounts(db: Kysely<Database>, ids: readonly string[]): Promise<{ sessions: number; messages: number; kv: number }> {
  const list = JSON.stringify(ids);
  const [sessions, messages, kv] = await Promise.all([
    count(db, sql`select count(*) as n from sessions where id in (select value from json_each(${list}))`),
    count(db, sql`select count(*) as n from messages where session_id in (select value from json_each(${list}))`),
    count(db, sql`select count(*) as n from plugin_kv where session_id in (select value from json_each(${list}))`),
  ]);
  return { sessions, messages, kv };
}
