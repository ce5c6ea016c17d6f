// The worker half of checkpointer.ts: its own connection to the database file, which runs a PASSIVE
// checkpoint (copies committed WAL frames into the database file; never waits for or blocks a
// reader or writer) each time it is asked, and says how it went. Plain JavaScript, so the worker
// needs no TypeScript loader on Node or Deno.
import { createRequire } from "node:module";
import { parentPort, workerData } from "node:worker_threads";

const Database = createRequire(import.meta.url)("libsql");
const db = new Database(workerData.path, { timeout: 5000 });
const checkpoint = db.prepare("PRAGMA wal_checkpoint(PASSIVE)");

parentPort.on("message", (msg) => {
  if (msg === "close") {
    db.close();
    parentPort.postMessage({ closed: true }); // the caller ends the thread
    return;
  }
  try {
    const row = checkpoint.get();
    parentPort.postMessage({ ok: true, busy: row.busy, log: row.log, checkpointed: row.checkpointed });
  } catch (err) {
    parentPort.postMessage({ ok: false, error: err instanceof Error ? err.message : String(err) });
  }
});
parentPort.postMessage({ ready: true });
