// The server answers while plugins spin (issue 9): a GET /healthz sent while a turn is held up by
// spinning plugins is answered before that turn, whether the plugins run on the server's thread
// (each call burns its whole fuel, inside the in-thread slice) or outgrow the slice and move to a
// worker, where they run to their deadline. Ordering, not timing: bench/suites/responsiveness.ts
// measures the p99.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pluginDir, type PluginDir } from "./helpers/plugin-dir.ts";
import { HOSTILE_DIR, newSession, pluginInfo, startPluginServer, type PluginServer } from "./helpers/plugins.ts";
import { countWork, needsTurn, STRETCH_MS, turnEventLoop } from "../runtime/sandbox/inline-slice.ts";
import { compileEagerly } from "../runtime/sandbox/eager-compile.ts";
import { spawnHookbox } from "./helpers/child.ts";
import { nestedBlocksModule } from "./helpers/wat-modules.ts";

/**
 * Copies of the loop plugin. In-thread the event loop turns once between two calls (each a ~40 ms
 * stretch it cannot interrupt), and this test's own client, in the same process, needs a few turns
 * for one request: 8 copies leave it 7 turns. In a worker each call leaves the thread free.
 */
const copies = (mode: "in-thread" | "worker") => Array.from({ length: mode === "in-thread" ? 8 : 3 }, (_, i) => `spin-${i}`);

/**
 * Sends a turn and, as soon as its first plugin call has ended (the other copies are still to run),
 * a GET /healthz; returns which answered first.
 */
async function race(s: PluginServer, sid: string, first: string): Promise<{ order: string[]; turnStatus: number }> {
  const order: string[] = [];
  let firstCallEnded!: () => void;
  const underWay = new Promise<void>((resolve) => (firstCallEnded = resolve));
  const stop = s.core.dispatcher.onCall((e) => e.plugin === first && firstCallEnded());
  const turn = s.api("POST", `/v1/sessions/${sid}/turns`, { message: "hello" }).then((r) => {
    order.push("turn");
    return r;
  });
  await underWay;
  stop();
  const health = await fetch(`${s.url}/healthz`);
  assert.equal(health.status, 200);
  order.push("healthz");
  const t = await turn;
  return { order, turnStatus: t.status };
}

for (const mode of ["in-thread", "worker"] as const) {
  describe(`the server answers while plugins spin (${mode})`, () => {
    let s: PluginServer;
    let dir: PluginDir;
    const COPIES = copies(mode);
    before(async () => {
      dir = pluginDir();
      const manifest = JSON.parse(readFileSync(join(HOSTILE_DIR, "loop", "manifest.json"), "utf8"));
      const wasm = readFileSync(join(HOSTILE_DIR, "loop", "plugin.wasm"));
      for (const name of COPIES) dir.write(name, { ...manifest, name }, wasm);
      // in-thread: 400 M fuel is ~40 ms of spinning, inside the 50 ms slice. worker: unlimited fuel;
      // the first call outgrows the slice and goes on in a worker until its 1.5 s deadline.
      const limits = mode === "in-thread" ? { fuel: 400_000_000, timeout_seconds: 10 } : { fuel: 2 ** 40, timeout_seconds: 1.5 };
      s = await startPluginServer({
        dir: dir.path,
        enabled: COPIES,
        limits: Object.fromEntries(COPIES.map((n) => [n, limits])),
        quarantine_after: 1_000,
        cooloff_seconds: 0,
      });
    });
    after(async () => {
      await s?.close();
      dir?.remove();
    });

    it("a GET sent during a turn held up by spinning plugins is answered before the turn, twice", async () => {
      const sid = await newSession(s);
      for (let round = 0; round < 2; round++) {
        const { order, turnStatus } = await race(s, sid, COPIES[0]!);
        assert.equal(turnStatus, 200, "the turn itself succeeds: the plugins' failures are theirs");
        assert.deepEqual(order, ["healthz", "turn"], `round ${round}`);
      }
      for (const name of COPIES) {
        const info = await pluginInfo(s, name);
        assert.equal(info.stats.failures[mode === "in-thread" ? "fuel" : "timeout"], 2, `${name}: ${info.stats.last_error}`);
      }
    });
  });
}

describe("in-thread work between turns of the event loop", () => {
  it("asks for a turn once the plugins' own work since the last turn reaches the stretch, and starts again after it", async () => {
    await turnEventLoop();
    assert.equal(needsTurn(), false);
    countWork(STRETCH_MS / 2);
    // Host work in between (no countWork) does not bring the turn closer.
    const until = performance.now() + STRETCH_MS;
    while (performance.now() < until);
    assert.equal(needsTurn(), false, "only plugin work counts");
    countWork(STRETCH_MS / 2);
    assert.equal(needsTurn(), true);
    await turnEventLoop();
    assert.equal(needsTurn(), false, "the event loop turned: counting starts again");
  });
});

// V8 compiled a WASM function at its first call, on the calling thread, unmetered: one function of
// 1.4 M nested blocks held an outside probe's server 4-10 s. Functions are now compiled with the
// module (off the thread, at load): Node sets V8's flag itself, Deno takes it from its command line
// (the deno tasks and npm scripts pass it) and a Deno server without it says so.
describe("plugin functions are compiled with their module, never at a first call", () => {
  const NEST = { name: "nest", version: "1.0.0", description: "one function of nested blocks", hooks: [], commands: [{ name: "nest", description: "runs it" }], capabilities: [], limits: { fuel: 100_000_000, memory_pages: 1, timeout_seconds: 5 } };

  it("compiles eagerly in this process (Node: set at the first compile; Deno: the test task's --v8-flags)", () => {
    assert.equal(compileEagerly(), true);
  });

  it("a plugin whose command is one function of 100,000 nested blocks loads and answers", async () => {
    const dir = pluginDir();
    dir.write("nest", NEST, nestedBlocksModule(100_000));
    const s = await startPluginServer({ dir: dir.path, enabled: ["nest"] });
    try {
      const res = await s.api("POST", "/v1/commands/nest", { raw_args: "" });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal((await pluginInfo(s, "nest")).stats.failures.timeout, 0);
    } finally {
      await s.close();
      dir.remove();
    }
  });

  it("a Deno server started without the flag warns in its log; with it, it does not", { skip: !("Deno" in globalThis) && "Node sets the flag itself" }, async () => {
    const dir = pluginDir();
    dir.write("nest", NEST, nestedBlocksModule(10));
    const home = mkdtempSync(join(tmpdir(), "hookbox-eager-"));
    try {
      for (const flags of [false, true]) {
        const config = { db_url: `file:${join(home, `${flags}.db`)}`, plugins: { dir: dir.path, enabled: ["nest"] } };
        const child = spawnHookbox(home, config, ["serve", "--host", "127.0.0.1", "--port", "0"], { HOOKBOX_LOG: "warn" }, flags);
        const listening = await new Promise<boolean>((resolve) => {
          const timer = setInterval(() => /listening on/.test(child.output()) && (clearInterval(timer), resolve(true)), 20);
          void child.exited.then(() => (clearInterval(timer), resolve(false)));
        });
        await child.kill();
        assert.ok(listening, child.output());
        const warned = /started without --v8-flags=--no-wasm-lazy-compilation.*DENO_V8_FLAGS/.test(child.output());
        assert.equal(warned, !flags, child.output());
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
      dir.remove();
    }
  });
});
