// Query plans of the hot reads and the clean-up: every session list order and filter, and the
// deletion's per-id statements, are served by an index (no full scan, no temporary sort), so their
// cost does not grow with the number of sessions. Plans are checked on a populated database.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { createClient } from "@libsql/client";
import { openStorage, type Storage } from "../runtime/storage/db.ts";
import { listQuery, type ListFilter } from "../runtime/sessions/service.ts";
import { ANY_SESSION_KV_SQL, KEYS_SQL, PURGE_SQL } from "../runtime/storage/plugin-kv.ts";

let dir: string;
let storage: Storage;

async function plan(sql: string, args: readonly unknown[]): Promise<string[]> {
  const res = await storage.client.execute({ sql: `EXPLAIN QUERY PLAN ${sql}`, args: args as never });
  return res.rows.map((r) => String(r.detail));
}

function assertIndexed(steps: string[], what: string): void {
  for (const s of steps) {
    assert.doesNotMatch(s, /TEMP B-TREE/, `${what}: temporary sort: ${steps.join(" / ")}`);
    // A SCAN of a table without an index is a full scan; json_each's virtual table (under an alias
    // too: "SCAN j VIRTUAL TABLE") is the id list.
    if (/^SCAN /.test(s) && !/json_each|VIRTUAL TABLE|USING (COVERING )?INDEX/.test(s)) assert.fail(`${what}: full scan: ${steps.join(" / ")}`);
  }
}

describe("storage: query plans", () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "hookbox-plans-"));
    storage = await openStorage(`file:${join(dir, "db.sqlite")}`);
    const now = Date.now();
    await storage.write(async (trx) => {
      const rows = Array.from({ length: 400 }, (_, i) => ({
        id: `s${i}`,
        profile: `p${i % 4}`,
        platform: "api",
        archived: i % 3 === 0 ? 1 : 0,
        created_at: now + i,
        updated_at: now + i,
      }));
      await trx.insertInto("sessions").values(rows).execute();
    });
    await storage.client.execute("ANALYZE");
  });
  after(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves every list filter and page of GET /v1/sessions from an index", async () => {
    const filters: ListFilter[] = [
      { limit: 50 },
      { limit: 50, profile: "p1" },
      { limit: 50, archived: true },
      { limit: 50, archived: false },
      { limit: 50, profile: "p2", archived: false },
    ];
    for (const f of filters) {
      for (const anchor of [undefined, { created_at: Date.now() + 100, id: "s100" }]) {
        const q = listQuery(storage.db, f, anchor).compile();
        const steps = await plan(q.sql, q.parameters);
        assertIndexed(steps, `${JSON.stringify(f)}${anchor ? " after" : ""}`);
        assert.ok(steps.some((s) => /USING (COVERING )?INDEX sessions_list/.test(s)), `${JSON.stringify(f)}: ${steps.join(" / ")}`);
      }
    }
  });

  it("finds a session's messages and plugin KV rows by session id", async () => {
    const ids = JSON.stringify(["s1", "s2"]);
    assertIndexed(await plan("delete from messages where session_id in (select value from json_each(?))", [ids]), "messages");
    // The purge of deleted sessions' KV (runtime/storage/plugin-kv.ts), through the partial index.
    const purge = await plan(PURGE_SQL, [ids]);
    assertIndexed(purge, "plugin_kv");
    assert.ok(purge.some((s) => /INDEX plugin_kv_session/.test(s)), purge.join(" / "));
    // Whether any session-scoped KV exists at all (a delete skips the purge when none does): one seek there.
    const any = await plan(ANY_SESSION_KV_SQL, []);
    assert.ok(any.some((s) => /INDEX plugin_kv_session/.test(s)), any.join(" / "));
  });

  it("lists a plugin's keys under a prefix as a range bounded at both ends (not every later key of the scope)", async () => {
    const steps = await plan(KEYS_SQL, ["p", "", "entry:"]);
    assert.ok(steps.some((s) => /USING PRIMARY KEY \(plugin=\? AND session_id=\? AND key>\? AND key<\?\)/.test(s)), steps.join(" / "));
  });

  it("keeps WAL, its writes answered after the WAL's fsync by default (off the thread: storage-batch checks it); none on request", async () => {
    const synced = storage.walSyncs();
    await storage.write(async (trx) => sql`insert into session_tombstones (id, deleted_at) values ('plans-durable', 1)`.execute(trx));
    assert.equal(storage.walSyncs(), synced + 1);
    assert.equal(String((await storage.client.execute("PRAGMA journal_mode")).rows[0]!.journal_mode), "wal");
    // A new file gets 16 KiB pages (fewer pages per bulk delete)...
    assert.equal(Number((await storage.client.execute("PRAGMA page_size")).rows[0]!.page_size), 16384);
    const normal = await openStorage(`file:${join(dir, "normal.sqlite")}`, { durability: "normal" });
    try {
      await normal.write(async (trx) => sql`insert into session_tombstones (id, deleted_at) values ('plans-normal', 1)`.execute(trx));
      assert.equal(normal.walSyncs(), 0);
    } finally {
      await normal.close();
    }
  });

  it("opens a database made with another page size as it is", async () => {
    const path = join(dir, "small-pages.sqlite");
    const old = createClient({ url: `file:${path}` });
    await old.execute("PRAGMA page_size = 4096");
    await old.execute("create table earlier (x)");
    old.close();
    const s = await openStorage(`file:${path}`);
    try {
      assert.equal(Number((await s.client.execute("PRAGMA page_size")).rows[0]!.page_size), 4096);
      await s.write((trx) => trx.insertInto("sessions").values({ id: "s_old", profile: "p", platform: "api", created_at: 1, updated_at: 1 }).execute());
      assert.equal((await s.db.selectFrom("sessions").select("id").execute()).length, 1);
    } finally {
      await s.close();
    }
  });
});
