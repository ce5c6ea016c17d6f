// Large fixtures for crash tests (big enough that one delete or compaction transaction takes a
// noticeable time), and a probe that tells, from another connection, when a writer holds the lock.
import { sql } from "kysely";
import { createClient, type Client } from "@libsql/client";
import type { Core } from "../../runtime/core.ts";

/** A root session with `children` child sessions of `perChild` messages and one session KV row each. */
export async function seedTree(core: Core, root: string, profile: string, children: number, perChild: number): Promise<string[]> {
  // Inlined as literals: bound JS numbers arrive as REAL, and i / 30.0 would not name a session.
  const per = sql.lit(perChild);
  await core.storage.write(async (trx) => {
    await sql`insert into sessions (id, profile, platform, created_at, updated_at) values (${root}, ${profile}, 'api', 1, 1)`.execute(trx);
    await sql`with recursive n(i) as (select 1 union all select i + 1 from n where i < ${children})
      insert into sessions (id, profile, platform, parent_session_id, created_at, updated_at)
      select ${root} || '_' || i, ${profile}, 'api', ${root}, 1, 1 from n`.execute(trx);
    await sql`with recursive n(i) as (select 0 union all select i + 1 from n where i < ${children * perChild - 1})
      insert into messages (session_id, seq, role, content, tokens, created_at)
      select ${root} || '_' || (i / ${per} + 1), i % ${per} + 1, 'user', 'message ' || i || ' of a long and wordy conversation', 9, 1 from n`.execute(trx);
    await sql`update sessions set token_estimate = 9 * ${per} where parent_session_id = ${root}`.execute(trx);
    await sql`insert into plugin_kv (plugin, session_id, key, value, updated_at)
      select 'counter', id, 'seen', '1', 1 from sessions where parent_session_id = ${root}`.execute(trx);
  });
  return [root, ...Array.from({ length: children }, (_, i) => `${root}_${i + 1}`)];
}

/** One long session: `n` rows alternating user / tool / assistant, words enough to summarize. */
export async function seedLongSession(core: Core, id: string, n: number): Promise<void> {
  await core.storage.write(async (trx) => {
    await sql`insert into sessions (id, profile, platform, created_at, updated_at) values (${id}, 'long', 'api', 1, 1)`.execute(trx);
    await sql`with recursive k(i) as (select 1 union all select i + 1 from k where i < ${n})
      insert into messages (session_id, seq, role, content, tool_name, tokens, created_at)
      select ${id}, i, case i % 3 when 1 then 'user' when 2 then 'tool' else 'assistant' end,
             'row ' || i || ' alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi',
             case i % 3 when 2 then 'calculator' else null end, 22, 1 from k`.execute(trx);
    await sql`update sessions set token_estimate = (select sum(tokens) from messages where session_id = ${id}) where id = ${id}`.execute(trx);
  });
}

/** A connection that asks, without waiting, whether some other connection is writing. */
export async function writeLockProbe(url: string): Promise<{ writerActive(): Promise<boolean>; close(): void }> {
  const client: Client = createClient({ url, timeout: 1, concurrency: 1 });
  await client.execute("PRAGMA busy_timeout = 0");
  return {
    async writerActive() {
      try {
        const tx = await client.transaction("write");
        await tx.rollback();
        tx.close();
        return false;
      } catch (err) {
        if (/SQLITE_BUSY|database is locked/i.test(String((err as { code?: string }).code ?? "") + String(err))) return true;
        throw err;
      }
    },
    close: () => client.close(),
  };
}
