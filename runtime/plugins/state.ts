// The operator's decisions about plugins that outlive a process: enable/disable overrides and
// quarantines, one plugin_state row per plugin (shared by every process on the database).
import type { Storage } from "../storage/db.ts";
import type { PluginStateTable } from "../storage/schema.ts";
import { log } from "../log.ts";

export class PluginStateStore {
  constructor(
    private readonly storage: Storage,
    private readonly now: () => number,
  ) {}

  async load(): Promise<Map<string, PluginStateTable>> {
    const rows = await this.storage.db.selectFrom("plugin_state").selectAll().execute();
    return new Map(rows.map((r) => [r.name, r]));
  }

  /** One plugin's row as it is now (the sync's second look, under the plugin's lock). */
  async get(name: string): Promise<PluginStateTable | undefined> {
    return this.storage.db.selectFrom("plugin_state").selectAll().where("name", "=", name).executeTakeFirst();
  }

  /** Applies `change` to the plugin's row; returns the whole row as written. */
  async save(name: string, change: { enabled?: number; quarantined?: string | null }): Promise<PluginStateTable> {
    const updated_at = this.now();
    return this.storage.write((trx) =>
      trx
        .insertInto("plugin_state")
        .values({ name, enabled: change.enabled ?? null, quarantined: change.quarantined ?? null, updated_at })
        .onConflict((oc) => oc.column("name").doUpdateSet({ ...change, updated_at }))
        .returningAll()
        .executeTakeFirstOrThrow(),
    );
  }

  /** A new quarantine (from the dispatcher): persisted; a failure to persist is logged, not thrown. */
  async quarantined(name: string, reason: string): Promise<PluginStateTable | undefined> {
    try {
      return await this.save(name, { quarantined: reason });
    } catch (err) {
      log("error", "could not persist plugin quarantine", { plugin: name, error: (err as Error).message });
      return undefined;
    }
  }
}
