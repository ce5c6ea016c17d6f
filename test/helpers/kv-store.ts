// A KvStore for the suite it is called in (opened before, closed after) on an in-memory database or
// a fresh sqld: the runtime's real group commit and reads, without a hookbox server around them.
import { after, before } from "node:test";
import { openStorage, type Storage } from "../../runtime/storage/db.ts";
import { KvStore } from "../../runtime/storage/plugin-kv.ts";
import type { TestDb } from "./dialects.ts";
import { startSqld, type Sqld } from "./sqld.ts";

export interface KvStoreFixture {
  readonly storage: Storage;
  readonly store: KvStore;
  /** What the store reported through onError (commits that failed for another reason than a guard). */
  readonly errors: unknown[];
}

export function useKvStore(db: TestDb = "file"): KvStoreFixture {
  const fixture = { errors: [] as unknown[] } as { storage: Storage; store: KvStore; errors: unknown[] };
  let sqld: Sqld | undefined;
  before(async () => {
    if (db === "sqld") sqld = await startSqld();
    fixture.storage = await openStorage(sqld?.url ?? "file::memory:");
    fixture.store = KvStore.open(fixture.storage, { now: () => Date.now(), onError: (_plugins, err) => void fixture.errors.push(err) });
  });
  after(async () => {
    await fixture.store.close();
    await fixture.storage.close();
    await sqld?.stop();
  });
  return fixture;
}
