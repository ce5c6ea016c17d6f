// The libSQL server goes away under a running hookbox and comes back: what a client is told meanwhile
// (503, so it retries, whichever part of the request met the outage), and that it is served again
// once the database is back, with no restart.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnServer, type Child } from "./helpers/child.ts";
import { SEED_DIR } from "./helpers/plugins.ts";
import { startSqld, type Sqld } from "./helpers/sqld.ts";
import { databaseFault } from "../runtime/http/errors.ts";
import { PluginCallError } from "../hooks/failures.ts";

describe("a libSQL server outage under a running hookbox", () => {
  let dir: string;
  let sqld: Sqld;
  let node: Child & { url: string };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "hookbox-outage-"));
    sqld = await startSqld();
    const config = { db_url: sqld.url, sessions_dir: join(dir, "sessions"), plugins: { dir: SEED_DIR, enabled: ["task-tracker"], grants: { "task-tracker": ["kv"] } } };
    node = await spawnServer(mkdtempSync(join(dir, "a-")), config);
  });

  after(async () => {
    await node?.kill();
    await sqld?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const kvLines = (text: string) => text.split("\n").filter((l) => l.startsWith("hookbox_plugin_kv_"));
  const task = (key?: string) =>
    fetch(`${node.url}/v1/commands/task`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(key ? { "idempotency-key": key } : {}) },
      body: JSON.stringify({ raw_args: "" }), // lists the tasks: a KV read
    }).then(async (r) => ({ status: r.status, body: await r.json() }));

  it("a plugin command whose KV read meets the outage answers 503 (not the command's 422); the server recovers by itself", async () => {
    assert.equal((await task()).status, 200);
    await sqld.kill();
    const down = await task();
    assert.equal(down.status, 503, JSON.stringify(down.body));
    assert.equal(down.body.error.code, "plugin_unavailable");
    // With a key, the claim meets the outage first: the database's 503.
    const keyed = await task("during");
    assert.equal(keyed.status, 503, JSON.stringify(keyed.body));
    assert.equal(keyed.body.error.code, "database_unavailable");
    await sqld.restart();
    let again = await task("during");
    for (let i = 0; i < 50 && again.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 200));
      again = await task("during");
    }
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.doesNotThrow(() => JSON.parse(again.body.output), again.body.output);
  });

  // Found by an outside probe: after a hang longer than a read's timeout, reads were refused for 5 s
  // more although the server answered again, and a turn meeting that refusal answered 500.
  it("a hang longer than a read's timeout: 503 meanwhile, never 500, and served again as soon as the server answers", async () => {
    const created = await fetch(`${node.url}/v1/sessions`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }).then((r) => r.json());
    const turn = () =>
      fetch(`${node.url}/v1/sessions/${created.session.id}/turns`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message: "hi" }) }).then(
        async (r) => ({ status: r.status, body: await r.json() }),
      );
    assert.equal((await turn()).status, 200);
    // A task: a KV key of the plugin's.
    const opened = await fetch(`${node.url}/v1/commands/task`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ raw_args: "write the report", session_id: created.session.id }) });
    assert.equal(opened.status, 200);
    const before = await fetch(`${node.url}/metrics`).then((r) => r.text());
    assert.ok(kvLines(before).length > 0, before);
    sqld.pause();
    let hung: { status: number; body: any };
    let metrics: { status: number; text: string };
    try {
      hung = await task(); // its KV read gives up after the read timeout
      // Monitoring goes on while the database hangs (the scrape read the KV gauges and hung with it).
      metrics = await fetch(`${node.url}/metrics`, { signal: AbortSignal.timeout(5_000) }).then(async (r) => ({ status: r.status, text: await r.text() }));
    } finally {
      sqld.resume();
    }
    assert.equal(metrics.status, 200);
    // The KV gauges keep the values of the last scrape that could read them.
    assert.deepEqual(kvLines(metrics.text), kvLines(before));
    assert.equal(hung.status, 503, JSON.stringify(hung.body));
    await new Promise((r) => setTimeout(r, 300)); // the read given up on is answered now
    const after = await turn();
    assert.equal(after.status, 200, JSON.stringify(after.body));
    // A read refused meanwhile is the database's unavailability, as any other: 503.
    assert.ok(databaseFault(new PluginCallError("unavailable", "database: database read refused: the server did not answer a read within 2000 ms; retrying after 5000 ms")));
    // A full disk refuses the write whole: to retry, as the database's (it was a bare 500 "internal").
    assert.ok(databaseFault(Object.assign(new Error("SQLITE_FULL: database or disk is full"), { code: "SQLITE_FULL" })));
    assert.ok(databaseFault(Object.assign(new Error("SQLITE_IOERR_WRITE: disk I/O error"), { code: "SQLITE_IOERR_WRITE" })));
    // A libSQL server that ended a transaction holding its lock too long, past the retries: 503 (it was a 500; an outside probe).
    assert.ok(databaseFault(Object.assign(new Error("TRANSACTION_TIMEOUT: Transaction timed out"), { code: "TRANSACTION_TIMEOUT" })));
    assert.ok(databaseFault(new Error("SQLITE_UNKNOWN: SQLite error: cannot rollback - no transaction is active")));
    assert.equal(databaseFault(new Error("SQLITE_CONSTRAINT: UNIQUE constraint failed")), undefined);
  });
  // Found by an outside probe: SIGTERM waited for the plugin state sync's read, which a server that
  // hangs never answers (the client has no timeout of its own): the process did not stop.
  it("SIGTERM while the server hangs: hookbox stops, without waiting for its plugin state sync", async () => {
    sqld.pause();
    try {
      await new Promise((r) => setTimeout(r, 2_500)); // a sync (every 2 s) is waiting on the server now
      // process.kill, not proc.kill: Deno's child_process reports a child it signalled as killed by
      // that signal even when the child handled it and exited 0.
      process.kill(node.proc.pid!, "SIGTERM");
      const stopped = await Promise.race([node.exited, new Promise((r) => setTimeout(() => r("still running"), 15_000))]);
      assert.equal(stopped, 0, node.output());
    } finally {
      sqld.resume();
    }
  });
});
