// The seed scenario at scale: sessions indexed by 4 sidecar-index and 3 task-tracker copies at
// their shipped limits, every session with one index entry per sidecar copy and one task per
// task-tracker copy. Index entries come through the real hook (on_session_start); tasks through the
// real /task command for the copy that owns it, and, for the two copies whose command a second
// registration would squat, written in task-tracker's own format before the plugins load.
import type { Core } from "../../runtime/core.ts";
import type { Storage } from "../../runtime/storage/db.ts";
import { openBenchCore, type BenchCore, type FleetSpec } from "./core.ts";

export const INDEX_FLEET: readonly FleetSpec[] = [
  { from: "sidecar-index", prefix: "sidecar", count: 4, firstKeepsCommands: true },
  { from: "task-tracker", prefix: "tasks", count: 3, firstKeepsCommands: true },
];
const PRESEEDED_TASKERS = ["tasks-01", "tasks-02"];

export interface IndexedCore extends BenchCore {
  /** Creates `n` sessions through the core (index entries by hook, tasks by /task); returns their ids. */
  populate(n: number): Promise<string[]>;
  /** plugin_kv rows left for these sessions (index entries and tasks), over every copy. */
  rowsFor(ids: readonly string[]): Promise<number>;
}

let serial = 0;

/** Session ids are chosen up front so the pre-seeded tasks can name them. */
export async function openIndexedCore(sessions: number): Promise<{ indexed: IndexedCore; ids: string[] }> {
  const run = ++serial;
  const ids = Array.from({ length: sessions }, (_, i) => `s_idx${run}_${String(i).padStart(6, "0")}`);
  const preseed = async (storage: Storage) => {
    const now = Date.now();
    const rows = PRESEEDED_TASKERS.flatMap((plugin) =>
      ids.map((sid, i) => ({
        plugin,
        session_id: "",
        key: `task:${sid}:${i + 1}`,
        value: JSON.stringify({ id: i + 1, title: `work on ${sid}`, session_id: sid, status: "open" }),
        updated_at: now,
      })),
    );
    await storage.write(async (trx) => {
      for (let i = 0; i < rows.length; i += 500) await trx.insertInto("plugin_kv").values(rows.slice(i, i + 500)).execute();
    });
  };
  const bc = await openBenchCore({ fleet: INDEX_FLEET, beforeStart: preseed });
  const core: Core = bc.core;
  const indexed: IndexedCore = {
    ...bc,
    async populate(n) {
      const created = ids.slice(0, n);
      const now = Date.now();
      const rows = created.map((id) => ({ id, profile: "bench", platform: "bench", created_at: now, updated_at: now }));
      await core.storage.write(async (trx) => {
        for (let i = 0; i < rows.length; i += 500) await trx.insertInto("sessions").values(rows.slice(i, i + 500)).execute();
      });
      for (const id of created) {
        await core.dispatcher.emit("on_session_start", {
          session_id: id,
          profile: "bench",
          platform: "bench",
          source: { user_id: null, chat_id: null, thread_id: null },
          model: core.model,
        });
        await core.commands.run("task", `work on ${id}`, { session_id: id, platform: "bench", source: { user_id: null, chat_id: null, thread_id: null } });
      }
      await (core.plugins as { flush?: () => Promise<void> }).flush?.();
      return created;
    },
    async rowsFor(list) {
      const json = JSON.stringify(list.flatMap((sid) => [`entry:${sid}`]));
      const entries = await core.storage.client.execute({
        sql: "select count(*) as n from plugin_kv where key in (select value from json_each(?))",
        args: [json],
      });
      const tasks = await core.storage.client.execute({
        sql: "select count(*) as n from plugin_kv where key like 'task:%' and substr(key, 6, instr(substr(key, 6), ':') - 1) in (select value from json_each(?))",
        args: [JSON.stringify(list)],
      });
      return Number(entries.rows[0]!.n) + Number(tasks.rows[0]!.n);
    },
  };
  return { indexed, ids };
}
