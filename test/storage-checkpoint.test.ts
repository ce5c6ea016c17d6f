// WAL checkpoints off the commit path (runtime/storage/idle-checkpoint.ts): a commit that takes the
// WAL past SQLite's default checkpoint size (1,000 pages) leaves its pages in the WAL, so the request
// that made it does not also copy every earlier request's pages into the database; once writes
// pause, a checkpoint copies them, and the database file alone holds the data.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStorage } from "../runtime/storage/db.ts";
import { IDLE_MS } from "../runtime/storage/idle-checkpoint.ts";
import { openNative } from "../runtime/storage/native.ts";

const dir = mkdtempSync(join(tmpdir(), "hookbox-checkpoint-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const VALUE = "x".repeat(200 * 1024);
/** 24 MiB of values: about 1,500 pages of 16 KiB, past the 1,000 at which a commit would checkpoint. */
const ROWS = 120;

describe("storage: WAL checkpoints when writes pause", () => {
  it("a large commit leaves its pages in the WAL; after a pause the database file holds them", async () => {
    const path = join(dir, "pause.db");
    const storage = await openStorage(`file:${path}`);
    try {
      const before = statSync(path).size;
      await storage.write(async (trx) => {
        for (let i = 0; i < ROWS; i++) await trx.insertInto("plugin_kv").values({ plugin: "p", session_id: "", key: `k${i}`, value: VALUE, updated_at: 1 }).execute();
      });
      await storage.batch([{ sql: "insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', 'last', ?, 1)", args: [VALUE] }]);
      assert.ok(statSync(path).size - before < VALUE.length * 10, "the commits did not copy their pages into the database file");
      const deadline = Date.now() + 10 * IDLE_MS + 5_000;
      while (statSync(path).size - before < VALUE.length * ROWS && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
      // The database file alone (a copy without its WAL) has every row.
      copyFileSync(path, join(dir, "alone.db"));
      const alone = openNative(join(dir, "alone.db"));
      try {
        assert.deepEqual(alone.prepare("select count(*) from plugin_kv where plugin = 'p'").raw(true).all([]), [[ROWS + 1]]);
      } finally {
        alone.close();
      }
    } finally {
      await storage.close();
    }
  });
  it("a process that wrote and closes leaves its pages in the database file, though another process keeps it open", async () => {
    const path = join(dir, "shared.db");
    const server = await openStorage(`file:${path}`); // stays open: SQLite's last-close checkpoint does not come
    try {
      const cli = await openStorage(`file:${path}`);
      await cli.write(async (trx) => {
        for (let i = 0; i < 10; i++) await trx.insertInto("plugin_kv").values({ plugin: "cli", session_id: "", key: `k${i}`, value: VALUE, updated_at: 1 }).execute();
      });
      await cli.close();
      copyFileSync(path, join(dir, "shared-alone.db"));
      const alone = openNative(join(dir, "shared-alone.db"));
      try {
        assert.deepEqual(alone.prepare("select count(*) from plugin_kv where plugin = 'cli'").raw(true).all([]), [[10]]);
      } finally {
        alone.close();
      }
    } finally {
      await server.close();
    }
  });
});
