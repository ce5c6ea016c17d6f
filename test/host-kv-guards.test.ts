// Guarded writes (kv_incr, kv_cas) in the KV group commit (runtime/storage/plugin-kv.ts): they share
// the group's one batch while every guard holds (a turn's writes stay one round trip), and one whose
// guard no longer holds fails alone as conflict while the rest of the group is committed.
import { describe, it, after, before } from "node:test";
import assert from "node:assert/strict";
import { PluginKv } from "../host-api/kv.ts";
import { PluginCallError } from "../hooks/failures.ts";
import { openStorage, type Storage } from "../runtime/storage/db.ts";
import { KvStore } from "../runtime/storage/plugin-kv.ts";

describe("guarded KV writes in the group commit", () => {
  let storage: Storage;
  let store: KvStore;
  const quota = { keys: 1_000, bytes: 1_000_000 };
  before(async () => {
    storage = await openStorage("file::memory:");
    store = KvStore.open(storage, { now: () => Date.now(), onError: () => undefined });
  });
  after(async () => {
    await store.close();
    await storage.close();
  });

  it("plain and guarded change sets of one fan-out commit in one round trip", async () => {
    const plain = new PluginKv("plain", store, quota);
    const counter = new PluginKv("counter", store, quota);
    const before = store.writeRoundTrips;
    plain.set("", "seen", "1");
    plain.end(true);
    assert.equal(counter.incr("", "n", 1), 1);
    const committing = counter.end(true);
    assert.ok(committing, "a guarded call waits for its commit");
    await committing;
    await store.flush();
    assert.equal(store.writeRoundTrips - before, 1);
    assert.equal(store.get("plain", "", "seen"), "1");
    assert.equal(store.get("counter", "", "n"), "1");
  });

  it("a guard that no longer holds fails its own call as conflict; the others in the group are committed", async () => {
    const counter = new PluginKv("counter2", store, quota);
    const other = new PluginKv("other", store, quota);
    assert.equal(counter.incr("", "n", 1), 1);
    await counter.end(true);
    // This call reads n = 1; another writer (another process) sets n = 5 before it commits.
    assert.equal(counter.incr("", "n", 1), 2);
    await store.commit({ plugin: "counter2", sweeps: [], writes: [["", "n", "5"]], guards: [] });
    other.set("", "k", "v");
    other.end(true);
    const lost = counter.end(true);
    await assert.rejects(lost!, (err: unknown) => err instanceof PluginCallError && err.kind === "conflict");
    await store.flush();
    assert.equal(store.get("other", "", "k"), "v", "the plain set of the same group is committed");
    assert.equal(store.get("counter2", "", "n"), "5", "the lost race wrote nothing");
    // Run again (as the runtime does), the call reads 5 and commits 6.
    assert.equal(counter.incr("", "n", 1), 6);
    await counter.end(true);
    assert.equal(store.get("counter2", "", "n"), "6");
  });
});
