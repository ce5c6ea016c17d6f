// WAL checkpoints on the embedded file run on a worker thread, not inside the COMMIT of the write that
// crossed SQLite's 1,000-frame line (which made that request wait for the copy of every frame into the
// database file and its fsync: some 50 ms after a 40 MB bulk delete). Nothing committed is lost, and
// closing the storage while a checkpoint runs neither hangs nor loses anything.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { CHECKPOINT_FRAMES } from "../runtime/storage/checkpointer.ts";
import { openStorage, type Storage } from "../runtime/storage/db.ts";

const dir = mkdtempSync(join(tmpdir(), "hookbox-checkpoint-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const ROWS = 20_000; // of 2,000 bytes: about 40 MB, some 2,600 frames of 16 KiB

async function until(what: string, test: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!test()) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function openReady(name: string): Promise<Storage> {
  const storage = await openStorage(`file:${join(dir, name)}`);
  await until("the checkpointer is up", () => storage.checkpointer?.active === true);
  await storage.write((trx) => sql`create table big (n integer primary key, pad blob not null)`.execute(trx));
  return storage;
}

const fill = (storage: Storage) =>
  storage.write((trx) => sql`insert into big (n, pad) select value, randomblob(2000) from generate_series(1, ${ROWS})`.execute(trx));

async function countRows(name: string): Promise<number> {
  const storage = await openStorage(`file:${join(dir, name)}`);
  try {
    const res = await sql<{ n: number }>`select count(*) as n from big`.execute(storage.db);
    return Number(res.rows[0]!.n);
  } finally {
    await storage.close();
  }
}

describe("WAL checkpoints off the server's thread", () => {
  it("a commit past 1,000 frames returns before the checkpoint; the worker copies the frames soon after", async () => {
    const storage = await openReady("a.db");
    try {
      await fill(storage);
      const pending = storage.checkpointer!.pendingFrames()!;
      // Checkpointed inside the COMMIT, none would be left.
      assert.ok(pending >= CHECKPOINT_FRAMES, `${pending} frames waiting right after the commit`);
      await until("the frames are copied", () => storage.checkpointer!.pendingFrames()! < CHECKPOINT_FRAMES);
    } finally {
      await storage.close();
    }
    assert.equal(await countRows("a.db"), ROWS);
  });

  it("under writes that never pause, the WAL still starts over: it does not grow write after write", async () => {
    const storage = await openReady("c.db");
    try {
      await fill(storage);
      const one = storage.checkpointer!.walFrames()!.frames; // what a write of every row adds
      let most = 0;
      for (let round = 0; round < 4; round++) {
        await storage.write((trx) => sql`update big set pad = randomblob(2000)`.execute(trx));
        // Small commits back to back while the worker copies: the WAL is never wholly copied between them.
        for (let i = 0; i < 150; i++) await storage.batch([{ sql: "update big set pad = randomblob(2000) where n = ?", args: [i + 1] }]);
        most = Math.max(most, storage.checkpointer!.walFrames()!.frames);
      }
      // Four writes of every row: a WAL that never started over would hold about 5x one of them.
      assert.ok(most < 3 * one, `the WAL reached ${most} frames; one write of every row is ${one}`);
    } finally {
      await storage.close();
    }
    assert.equal(await countRows("c.db"), ROWS);
  });

  it("closing while a checkpoint runs finishes it and loses nothing", async () => {
    const storage = await openReady("b.db");
    await fill(storage);
    await storage.close(); // the checkpoint asked for by the write is under way or queued
    assert.equal(await countRows("b.db"), ROWS);
  });
});
