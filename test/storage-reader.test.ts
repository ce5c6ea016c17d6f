// The synchronous reader on the embedded file (plugin KV, sessions:read, a turn's history): every read
// sees every commit made before it: this process's own (storage.write, storage.batch, whatever the
// group commit's timing), and another process's once that process has said so over I/O, whichever
// phase of the event loop the earlier reads ran in. Reads of one run of the microtask queue share a
// read snapshot (a fan-out's plugins each reading a key); it never outlives that run, and this
// process's own commit ends it. (A snapshot kept until setImmediate was tried and reverted: on Node,
// opened in the timers or check phase, it stayed open across the next poll for I/O.)
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setImmediate } from "node:timers";
import { createClient } from "@libsql/client";
import { openStorage } from "../runtime/storage/db.ts";

const dir = mkdtempSync(join(tmpdir(), "hookbox-reader-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const VALUE = "select value from plugin_kv where plugin = 'p' and session_id = '' and key = ?";
const INSERT_A = "insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', 'a', '1', 1)";

async function open(name: string) {
  const url = `file:${join(dir, `${name}.sqlite`)}`;
  const storage = await openStorage(url);
  const reader = storage.syncReader();
  const value = (key: string) => reader.one(VALUE, [key])?.[0];
  return { storage, url, value };
}

/** Two connected sockets: one process telling another something. */
async function socketPair(): Promise<{ a: net.Socket; b: net.Socket; close: () => void }> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const accepted = new Promise<net.Socket>((r) => server.once("connection", r));
  const a = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1");
  await new Promise((r) => a.once("connect", r));
  const b = await accepted;
  return { a, b, close: () => (a.destroy(), b.destroy(), server.close()) };
}

describe("storage: the synchronous reader on the embedded file", () => {
  it("sees this process's writes at once, through batch and write, also after several reads in the same turn", async () => {
    const { storage, value } = await open("own");
    try {
      for (let i = 0; i < 3; i++) assert.equal(value("a"), undefined);
      await storage.batch([{ sql: INSERT_A, args: [] }]);
      assert.equal(value("a"), "1");
      await storage.write((trx) => trx.updateTable("plugin_kv").set({ value: "2" }).where("key", "=", "a").execute());
      assert.equal(value("a"), "2");
      // A failed batch changes nothing.
      await assert.rejects(storage.batch([{ sql: "update plugin_kv set value = '3' where key = 'a'", args: [] }, { sql: "select no_such_function()", args: [] }]));
      assert.equal(value("a"), "2");
    } finally {
      await storage.close();
    }
  });

  it("sees this process's writes after reads that shared a snapshot", async () => {
    const { storage, value } = await open("same-run");
    try {
      await storage.batch([{ sql: INSERT_A, args: [] }]);
      // Several reads (they share a snapshot), then a write: the read after it must see it (the
      // write ends the snapshot, whether or not the event loop turned while it committed).
      for (let i = 0; i < 3; i++) assert.equal(value("a"), "1");
      await storage.write((trx) => trx.updateTable("plugin_kv").set({ value: "2" }).where("key", "=", "a").execute());
      assert.equal(value("a"), "2");
      for (let i = 0; i < 3; i++) assert.equal(value("b"), undefined);
      await storage.batch([{ sql: "insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', 'b', '3', 1)", args: [] }]);
      assert.equal(value("b"), "3");
    } finally {
      await storage.close();
    }
  });

  it("a snapshot shared by reads ends with their run of the microtask queue: the next task sees another connection's commit", async () => {
    const { storage, url, value } = await open("next-task");
    const other = createClient({ url }); // another process on the same file
    try {
      await storage.batch([{ sql: "insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', 'k', 'old', 1)", args: [] }]);
      for (const nextTask of [(r: () => void) => setImmediate(r), (r: () => void) => setTimeout(r, 0)]) {
        await other.execute("update plugin_kv set value = 'old' where key = 'k'");
        await new Promise<void>((r) => nextTask(r));
        for (let i = 0; i < 3; i++) assert.equal(value("k"), "old");
        await other.execute("update plugin_kv set value = 'new' where key = 'k'");
        // Still the same run (no task has begun since the reads): either answer is a correct
        // read; once the next task begins, only the new one is.
        await new Promise<void>((r) => nextTask(r));
        assert.equal(value("k"), "new");
      }
    } finally {
      other.close();
      await storage.close();
    }
  });

  it("a batch's caller sees its commit even when other reads ran in the same check phase before it", async () => {
    const { storage, value } = await open("check");
    try {
      setImmediate(() => (value("a"), value("b"))); // another turn's reads, queued before the batch's commit
      await storage.batch([{ sql: INSERT_A, args: [] }]);
      assert.equal(value("a"), "1");
    } finally {
      await storage.close();
    }
  });

  for (const start of ["after await storage.batch (check phase)", "after a timer (timers phase)"] as const) {
    it(`a notification sent after another process committed sees that commit (${start})`, async () => {
      const { storage, url, value } = await open(start.startsWith("after await") ? "io-check" : "io-timer");
      const other = createClient({ url }); // another process on the same file
      const { a, b, close } = await socketPair();
      try {
        await storage.batch([{ sql: "insert into plugin_kv (plugin, session_id, key, value, updated_at) values ('p', '', 'k', 'old', 1)", args: [] }]);
        if (!start.startsWith("after await")) await new Promise((r) => setTimeout(r, 1));
        // This turn reads twice (a fan-out's plugins, a turn's session and history).
        assert.equal(value("k"), "old");
        assert.equal(value("x"), undefined);
        // Meanwhile another process commits, then tells us over a socket.
        await other.execute("update plugin_kv set value = 'new' where key = 'k'");
        const seen = new Promise((resolve) => b.once("data", () => resolve(value("k"))));
        a.write("committed");
        assert.equal(await seen, "new");
      } finally {
        close();
        other.close();
        await storage.close();
      }
    });
  }
});
