// What every service shares: configuration, storage, the hook dispatcher, the clock and the
// per-session locks that keep turns, compactions and session changes of one session in order.
import type { Config } from "./config.ts";
import type { Storage } from "./storage/db.ts";
import type { HookDispatcher } from "../hooks/dispatcher.ts";
import type { KeyedMutex } from "./util/mutex.ts";
import type { KvStore } from "./storage/plugin-kv.ts";

export interface CoreContext {
  readonly config: Config;
  readonly storage: Storage;
  readonly dispatcher: HookDispatcher;
  /** Every plugin's KV on this database (synchronous reads, group-committed writes). */
  readonly kv: KvStore;
  readonly now: () => number;
  readonly sessionLocks: KeyedMutex;
  /** The model turns call (the provider's model name), as hooks report it. */
  readonly model: string;
}

export const newId = (prefix: string): string => `${prefix}_${crypto.randomUUID().replaceAll("-", "")}`;
