// Guarded writes (kv_incr, kv_cas) in the KV group commit (runtime/storage/plugin-kv.ts): they share
// the group's one batch while every guard holds (a turn's writes stay one round trip), and one whose
// guard no longer holds fails alone as conflict while the rest of the group is committed.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PluginKv } from "../host-api/kv.ts";
import { PluginCallError } from "../hooks/failures.ts";
import { useKvStore } from "./helpers/kv-store.ts";
import { TEST_DBS } from "./helpers/dialects.ts";

describe("guarded KV writes in the group commit", () => {
  const db = useKvStore();
  const quota = { keys: 1_000, bytes: 1_000_000 };

  it("plain and guarded change sets of one fan-out commit in one round trip", async () => {
    const plain = new PluginKv("plain", db.store, quota);
    const counter = new PluginKv("counter", db.store, quota);
    const before = db.store.writeRoundTrips;
    plain.set("", "seen", "1");
    plain.end(true);
    assert.equal(counter.incr("", "n", 1), 1);
    const committing = counter.end(true);
    assert.ok(committing, "a guarded call waits for its commit");
    await committing;
    await db.store.flush();
    assert.equal(db.store.writeRoundTrips - before, 1);
    assert.equal(db.store.get("plain", "", "seen"), "1");
    assert.equal(db.store.get("counter", "", "n"), "1");
  });

  it("a plugin's guarded write right after its own plain write commits without a failed batch first", async () => {
    const kv = new PluginKv("mixed", db.store, quota);
    const before = db.store.writeRoundTrips;
    kv.set("", "k", "x");
    kv.end(true); // in the overlay, not committed yet
    assert.equal(kv.cas("", "k", "x", "y"), true);
    await kv.end(true);
    await db.store.flush();
    assert.equal(db.store.get("mixed", "", "k"), "y");
    assert.equal(db.store.writeRoundTrips - before, 2, "its set then the guarded one; no batch that fails on the guard");
  });

  it("every plain read goes to the database; a kv_cas after a read guards the value that read saw", async () => {
    const kv = new PluginKv("reader", db.store, quota);
    assert.equal(kv.get("", "lock"), undefined);
    await db.store.commit({ plugin: "reader", sweeps: [], writes: [["", "lock", "held-by-B"]], guards: [] });
    assert.equal(kv.get("", "lock"), "held-by-B", "a commit of another writer is seen at the next read, in the same call too");
    const before = db.store.readRoundTrips;
    assert.equal(kv.cas("", "lock", "held-by-B", "mine"), true);
    assert.equal(db.store.readRoundTrips, before, "the guard took the value the call had read");
    await kv.end(true);
    assert.equal(db.store.get("reader", "", "lock"), "mine");
  });

  it("a guard that no longer holds fails its own call as conflict; the others in the group are committed", async () => {
    const counter = new PluginKv("counter2", db.store, quota);
    const other = new PluginKv("other", db.store, quota);
    assert.equal(counter.incr("", "n", 1), 1);
    await counter.end(true);
    // This call reads n = 1; another writer (another process) sets n = 5 before it commits.
    assert.equal(counter.incr("", "n", 1), 2);
    await db.store.commit({ plugin: "counter2", sweeps: [], writes: [["", "n", "5"]], guards: [] });
    other.set("", "k", "v");
    other.end(true);
    const lost = counter.end(true);
    await assert.rejects(lost!, (err: unknown) => err instanceof PluginCallError && err.kind === "conflict");
    await db.store.flush();
    assert.equal(db.store.get("other", "", "k"), "v", "the plain set of the same group is committed");
    assert.equal(db.store.get("counter2", "", "n"), "5", "the lost race wrote nothing");
    // Run again (as the runtime does), the call reads 5 and commits 6.
    assert.equal(counter.incr("", "n", 1), 6);
    await counter.end(true);
    assert.equal(db.store.get("counter2", "", "n"), "6");
  });
});

for (const dbKind of TEST_DBS) {
  describe(`a call's many guards, checked as one set (${dbKind})`, () => {
    const db = useKvStore(dbKind);
    const quota = { keys: 1_000, bytes: 1_000_000 };

    it("hold: every kv_incr commits; one no longer holding (a value changed, or an absent key now there) fails the whole call", async () => {
      const kv = new PluginKv("many", db.store, quota);
      const keys = Array.from({ length: 12 }, (_, i) => `n${i}`);
      // Half present (guard: this value), half absent (guard: still absent).
      for (const k of keys.slice(0, 6)) kv.set("", k, "1");
      await kv.end(true);
      for (const k of keys) kv.incr("", k, 1);
      await kv.end(true);
      assert.deepEqual(keys.map((k) => db.store.get("many", "", k)), [...Array(6).fill("2"), ...Array(6).fill("1")]);
      for (const [changed, value] of [["n3", "9"], ["absent-then-set", "7"]] as const) {
        for (const k of [...keys, "absent-then-set"]) kv.incr("", k, 1);
        await db.store.commit({ plugin: "many", sweeps: [], writes: [["", changed, value]], guards: [] });
        await assert.rejects(kv.end(true)!, (err: unknown) => err instanceof PluginCallError && err.kind === "conflict", changed);
      }
      assert.deepEqual(keys.map((k) => db.store.get("many", "", k)), [...Array(3).fill("2"), "9", ...Array(2).fill("2"), ...Array(6).fill("1")], "nothing of the failed calls");
      assert.equal(db.store.get("many", "", "absent-then-set"), "7");
    });
  });
}
