// Several processes starting at once on a fresh database (each its own OS process running the
// CLI): the migration lock lets one migrate while the others wait, and each migration runs once.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
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
        const runs = Array.from({ length: 20 }, (_, i) => spawnHookbox(mkdtempSync(join(dir, `p${i}-`)), config, ["sessions", "list"]));
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
