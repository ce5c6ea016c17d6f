// The synchronous reader on the embedded file (plugin KV, sessions:read, a turn's history): reads of
// one event-loop turn share a snapshot, and still every read sees what this process committed before
// it (storage.write and storage.batch end the snapshot), and another process's commit shows by the
// next turn of the event loop.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setImmediate } from "node:timers";
import { createClient } from "@libsql/client";
import { openStorage } from "../runtime/storage/db.ts";

const dir = mkdtempSync(join(tmpdir(), "hookbox-reader-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const VALUE = "select value from plugin_kv where plugin = 'p' and session_id = '' and key = ?";
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function open(name: string) {
  const url = `file:${join(dir, `${name}.sqlite`)}`;
  const storage = await openStorage(url);
  const reader = storage.syncReader();
  const value = (key: string) => reader.one(VALUE, [key])?.[0];
  return { storage, url, value };
}

describe("storage: the synchronous reader on the embedded file", () => {
  it("sees this process's writes at once, through batch and write, also after several reads in the same turn", async () => {
    const { storage, value } = await open("own");
    try {
      for (let i = 0; i < 3; i++) assert.equal(value("a"), undefined); // the turn's snapshot is open
      await storage.batch([{ sql: "insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', 'a', '1', 1)", args: [] }]);
      assert.equal(value("a"), "1");
      assert.equal(value("a"), "1");
      await storage.write((trx) => trx.updateTable("plugin_kv").set({ value: "2" }).where("key", "=", "a").execute());
      assert.equal(value("a"), "2");
      // A failed write ends the snapshot too (nothing of it is seen: it rolled back).
      await assert.rejects(storage.batch([{ sql: "update plugin_kv set value = '3' where key = 'a'", args: [] }, { sql: "select no_such_function()", args: [] }]));
      assert.equal(value("a"), "2");
    } finally {
      await storage.close();
    }
  });

  it("sees another connection's commit by the next turn of the event loop", async () => {
    const { storage, url, value } = await open("other");
    const other = createClient({ url });
    try {
      assert.equal(value("b"), undefined);
      assert.equal(value("b"), undefined);
      await other.execute("insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', 'b', 'theirs', 1)");
      await nextTurn();
      assert.equal(value("b"), "theirs");
      await other.execute("update plugin_kv set value = 'again' where key = 'b'");
      await nextTurn();
      assert.equal(value("b"), "again");
    } finally {
      other.close();
      await storage.close();
    }
  });
});
