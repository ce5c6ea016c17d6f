// A KvStore on an in-memory database for the suite it is called in (opened before, closed after):
// the runtime's real group commit and reads, without a server around them.
import { after, before } from "node:test";
import { openStorage, type Storage } from "../../runtime/storage/db.ts";
import { KvStore } from "../../runtime/storage/plugin-kv.ts";

export interface KvStoreFixture {
  readonly storage: Storage;
  readonly store: KvStore;
  /** What the store reported through onError (commits that failed for another reason than a guard). */
  readonly errors: unknown[];
}

export function useKvStore(): KvStoreFixture {
  const fixture = { errors: [] as unknown[] } as { storage: Storage; store: KvStore; errors: unknown[] };
  before(async () => {
    fixture.storage = await openStorage("file::memory:");
    fixture.store = KvStore.open(fixture.storage, { now: () => Date.now(), onError: (_plugins, err) => void fixture.errors.push(err) });
  });
  after(async () => {
    await fixture.store.close();
    await fixture.storage.close();
  });
  return fixture;
}
