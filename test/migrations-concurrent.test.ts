// Several processes starting at once on a fresh database (each its own OS process running the
// CLI): the migration lock lets one migrate while the others wait, and each migration runs once.
// A start on a database already migrated writes nothing, so it is not held up by another writer.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { openNative } from "../runtime/storage/native.ts";
import { spawnHookbox } from "./helpers/child.ts";
import { TEST_DBS } from "./helpers/dialects.ts";
import { startSqld } from "./helpers/sqld.ts";

for (const db of TEST_DBS) {
  describe(`20 simultaneous starts on a fresh database [${db}]`, () => {
    it("all succeed and the schema is migrated once", async () => {
      const dir = mkdtempSync(join(tmpdir(), "hookbox-starts-"));
      const sqld = db === "sqld" ? await startSqld() : undefined;
      try {
        const config = { db_url: sqld?.url ?? `file:${join(dir, "hookbox.db")}`, sessions_dir: join(dir, "sessions"), plugins: { dir: join(dir, "none") } };
        // Debug logs: a failed start shows its stack in the assertion message.
        const runs = Array.from({ length: 20 }, (_, i) => spawnHookbox(mkdtempSync(join(dir, `p${i}-`)), config, ["sessions", "list"], { HOOKBOX_LOG: "debug" }));
        const codes = await Promise.all(runs.map((r) => r.exited));
        codes.forEach((code, i) => assert.equal(code, 0, runs[i]!.output()));
        const client = createClient({ url: config.db_url });
        try {
          const m = await client.execute("select count(*) as n, count(distinct name) as d from kysely_migration");
          assert.equal(Number(m.rows[0]!.n), Number(m.rows[0]!.d), "each migration recorded once");
        } finally {
          client.close();
        }
      } finally {
        await sqld?.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

describe("a start on a migrated database", () => {
  it("lists sessions while another connection holds the write lock (it writes nothing)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hookbox-starts-"));
    try {
      const config = { db_url: `file:${join(dir, "hookbox.db")}`, sessions_dir: join(dir, "sessions"), plugins: { dir: join(dir, "none") } };
      const first = spawnHookbox(mkdtempSync(join(dir, "a-")), config, ["sessions", "list"]);
      assert.equal(await first.exited, 0, first.output());
      const holder = openNative(join(dir, "hookbox.db"));
      holder.exec("BEGIN IMMEDIATE");
      try {
        const second = spawnHookbox(mkdtempSync(join(dir, "b-")), config, ["sessions", "list"]);
        assert.equal(await second.exited, 0, second.output());
      } finally {
        holder.exec("ROLLBACK");
        holder.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// Killed while the migrations ran on its first start, a process left tables no later start could
// create again ("table sessions already exists"): the database could not be opened any more (an
// outside probe). Each process is killed after the k-th write to the WAL, k spread over the run.
describe("a start killed while it migrates a fresh database file", () => {
  it("leaves a database the next start migrates and opens", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hookbox-migkill-"));
    try {
      const killedAt: string[] = [];
      for (const k of [2, 5, 10, 20]) {
        const run = mkdtempSync(join(dir, `k${k}-`));
        const file = join(run, "hookbox.db");
        const config = { db_url: `file:${file}`, sessions_dir: join(run, "sessions"), plugins: { dir: join(run, "none") } };
        const first = spawnHookbox(run, config, ["sessions", "list"]);
        let writes = 0;
        let last = 0;
        let done = false;
        void first.exited.then(() => (done = true));
        // Polls the WAL's mtime and kills right after its k-th change (or lets a quick run finish).
        while (!done && writes < k) {
          let m = 0;
          try {
            m = statSync(`${file}-wal`).mtimeMs;
          } catch {
            /* not there yet */
          }
          if (m !== 0 && m !== last) (last = m), writes++;
          await new Promise((r) => setImmediate(r));
        }
        if (!done) {
          killedAt.push(`${k}: ${await first.kill()}`);
          // The dead process's migration lease would hold the next start 30 s: expired here.
          const db = openNative(file);
          if (db.prepare("select 1 from sqlite_master where name = 'hookbox_migration_lock'").all([]).length > 0) db.exec("delete from hookbox_migration_lock");
          db.close();
        }
        const again = spawnHookbox(run, config, ["sessions", "list"]);
        assert.equal(await again.exited, 0, `killed after WAL write ${k}: ${again.output()}`);
      }
      assert.ok(killedAt.length > 0, "some starts were killed mid-way");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
