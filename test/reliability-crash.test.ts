// Crash safety: hookbox runs as a child process (the HTTP server, or the CLI) on a temp database
// big enough that a bulk delete or a compaction takes a while; it is SIGKILLed the moment a probe
// connection sees its write transaction holding the lock (mid-operation), then the database is
// reopened. Whichever side of the commit the kill landed on, the operation is applied entirely or
// not at all, and the stored data is consistent.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { parseConfig } from "../runtime/config.ts";
import { createCore, type Core } from "../runtime/core.ts";
import { setLogLevel } from "../runtime/log.ts";
import { inconsistencies, rowCounts } from "./helpers/db-check.ts";
import { spawnHookbox, spawnServer, type Child } from "./helpers/child.ts";
import { seedLongSession, seedTree, writeLockProbe } from "./helpers/crash-data.ts";

const outcomes: string[] = [];

describe("reliability: crash safety (SIGKILL mid-operation)", () => {
  let root: string;
  before(() => {
    setLogLevel("silent");
    root = mkdtempSync(join(tmpdir(), "hookbox-crash-"));
  });
  after(() => {
    console.log(`# reliability crash: ${outcomes.join(", ")}`);
    rmSync(root, { recursive: true, force: true });
  });

  /** A fresh database directory and the config the child and the test share. */
  function scenario(name: string) {
    const dir = mkdtempSync(join(root, `${name}-`));
    const config = { db_url: `file:${join(dir, "hookbox.db")}`, plugins: { dir: join(dir, "no-plugins") }, compaction: { keep_recent_messages: 4 } };
    return { dir, config, open: () => createCore(parseConfig(config, {})) };
  }

  /**
   * Waits until another connection has held the write lock for SUSTAIN_MS (the big operation is
   * writing; start-up's migration check holds it only for a moment), then kills the child. Returns
   * whether that was seen; if the operation finished first, it kills anyway.
   */
  async function killMidWrite(child: Child, url: string, done: Promise<unknown>): Promise<boolean> {
    const SUSTAIN_MS = 25;
    const probe = await writeLockProbe(url);
    let finished = false;
    void done.finally(() => (finished = true));
    let seen = false;
    try {
      const deadline = Date.now() + 60_000;
      let since: number | undefined;
      while (!finished && Date.now() < deadline) {
        if (await probe.writerActive()) {
          since ??= Date.now();
          if (Date.now() - since >= SUSTAIN_MS) {
            seen = true;
            break;
          }
        } else since = undefined;
        await new Promise((r) => setTimeout(r, 2));
      }
      await child.kill();
    } finally {
      probe.close();
    }
    return seen;
  }

  async function post(url: string, path: string, body: unknown): Promise<number | null> {
    try {
      return (await fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).status;
    } catch {
      return null; // the server died under the request: expected
    }
  }

  async function afterCrash(open: () => Promise<Core>, check: (core: Core) => Promise<string>): Promise<void> {
    const core = await open();
    try {
      const outcome = await check(core);
      assert.deepEqual(await inconsistencies(core.storage.db), []);
      outcomes.push(outcome);
    } finally {
      await core.close();
    }
  }

  it("server killed mid bulk delete (cascade of 4000 sessions, 120k messages, KV rows): all or nothing", async () => {
    const { dir, config, open } = scenario("bulk");
    const seeded = await open();
    const doomed = await seedTree(seeded, "doomed", "big", 4000, 30);
    const kept = await seedTree(seeded, "kept", "small", 3, 5);
    const full = await rowCounts(seeded.storage.db, doomed);
    await seeded.close();
    assert.deepEqual(full, { sessions: 4001, messages: 120_000, kv: 4000 });

    const server = await spawnServer(dir, config);
    const res = post(server.url, "/v1/sessions/bulk-delete", { profile: "big" });
    const midway = await killMidWrite(server, config.db_url, res);
    const status = await res;
    await afterCrash(open, async (core) => {
      const left = await rowCounts(core.storage.db, doomed);
      const none = { sessions: 0, messages: 0, kv: 0 };
      assert.ok(JSON.stringify(left) === JSON.stringify(full) || JSON.stringify(left) === JSON.stringify(none), `partial delete: ${JSON.stringify(left)}`);
      if (status === 200) assert.deepEqual(left, none, "answered 200 but the rows came back");
      assert.deepEqual(await rowCounts(core.storage.db, kept), { sessions: 4, messages: 15, kv: 3 });
      return `bulk delete ${left.sessions === 0 ? "applied" : "rolled back"}${midway ? " (killed while writing)" : ""}`;
    });
    // The restarted server serves the same state and can finish the job.
    const again = await spawnServer(dir, config);
    try {
      const rolledBack = (await fetch(`${again.url}/v1/sessions/doomed`)).status === 200;
      const res = await fetch(`${again.url}/v1/sessions/bulk-delete`, { method: "POST", body: JSON.stringify({ profile: "big" }) });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { deleted_ids: string[] }).deleted_ids.length, rolledBack ? 4001 : 0);
    } finally {
      await again.kill();
    }
    await afterCrash(open, async (core) => {
      assert.deepEqual(await rowCounts(core.storage.db, doomed), { sessions: 0, messages: 0, kv: 0 });
      return "bulk delete re-run after restart applied";
    });
  });

  it("server killed mid compaction (prune_tool_results over 8000 tool rows): all or nothing", async () => {
    const { dir, config, open } = scenario("prune");
    const seeded = await open();
    await seedLongSession(seeded, "long", 24_000);
    await seeded.close();
    const pruned = (core: Core) =>
      sql<{ n: number }>`select count(*) as n from messages where session_id = 'long' and content like '[tool result pruned:%'`.execute(core.storage.db).then((r) => Number(r.rows[0]!.n));

    const server = await spawnServer(dir, config);
    const res = post(server.url, "/v1/sessions/long/compress", { kind: "prune_tool_results" });
    const midway = await killMidWrite(server, config.db_url, res);
    const status = await res;
    await afterCrash(open, async (core) => {
      const n = await pruned(core);
      const eligible = 8000 - 1; // tool rows outside the last 4 messages (row 23999 is a tool row)
      assert.ok(n === 0 || n === eligible, `partial compaction: ${n} of ${eligible} tool rows pruned`);
      if (status === 200) assert.equal(n, eligible);
      const s = await core.storage.db.selectFrom("sessions").select("last_compaction_at").where("id", "=", "long").executeTakeFirstOrThrow();
      assert.equal(s.last_compaction_at !== null, n > 0, "last_compaction_at and the rows disagree");
      return `prune ${n > 0 ? "applied" : "rolled back"}${midway ? " (killed while writing)" : ""}`;
    });
  });

  it("server killed mid summarize (in place, 30k rows replaced by one summary): all or nothing", async () => {
    const { dir, config, open } = scenario("summarize");
    const seeded = await open();
    await seedLongSession(seeded, "long", 30_000);
    await seeded.close();

    const server = await spawnServer(dir, config);
    const res = post(server.url, "/v1/sessions/long/compress", { kind: "summarize" });
    const midway = await killMidWrite(server, config.db_url, res);
    const status = await res;
    await afterCrash(open, async (core) => {
      const rows = await core.storage.db.selectFrom("messages").select(["role", "seq"]).where("session_id", "=", "long").orderBy("seq").execute();
      const applied = rows.length === 5 && rows[0]!.role === "summary" && rows.slice(1).map((r) => r.seq).join() === "29997,29998,29999,30000";
      assert.ok(applied || (rows.length === 30_000 && !rows.some((r) => r.role === "summary")), `partial summarize: ${rows.length} rows`);
      if (status === 200) assert.ok(applied);
      return `summarize ${applied ? "applied" : "rolled back"}${midway ? " (killed while writing)" : ""}`;
    });
  });

  it("CLI killed mid `sessions delete` of a big cascade: all or nothing", async () => {
    const { dir, config, open } = scenario("cli");
    const seeded = await open();
    const doomed = await seedTree(seeded, "doomed", "big", 4000, 30);
    const full = await rowCounts(seeded.storage.db, doomed);
    await seeded.close();

    const child = spawnHookbox(dir, config, ["sessions", "delete", "doomed"]);
    const midway = await killMidWrite(child, config.db_url, child.exited);
    const code = await child.exited;
    await afterCrash(open, async (core) => {
      const left = await rowCounts(core.storage.db, doomed);
      const gone = left.sessions === 0 && left.messages === 0 && left.kv === 0;
      assert.ok(gone || JSON.stringify(left) === JSON.stringify(full), `partial delete: ${JSON.stringify(left)}`);
      if (code === 0) assert.ok(gone, "the CLI said done but the rows came back");
      return `cli delete ${gone ? "applied" : "rolled back"}${midway ? " (killed while writing)" : ""}`;
    });
  });
});
