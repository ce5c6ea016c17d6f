// The sandbox alone (no server): instrumentation is deterministic, and each limit stops a call with
// its typed failure while the instance keeps serving.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { callFailure } from "./helpers/call-failure.ts";
import { PluginCallError } from "../hooks/failures.ts";
import { instrument } from "../runtime/sandbox/instrument.ts";
import { compileInstrumented } from "../runtime/sandbox/module-cache.ts";
import type { HostBinding } from "../host-api/binding.ts";
import { WasmPlugin, type SandboxLimits } from "../runtime/sandbox/wasm-plugin.ts";
import { directCaller } from "../runtime/sandbox/direct-call.ts";
import { turnEventLoop } from "../runtime/sandbox/inline-slice.ts";
import { FIRST_BLOCK, FuelMeter, HOST_CALL_FUEL, hostCallCost } from "../runtime/sandbox/fuel.ts";
import { CallIo } from "../runtime/sandbox/call-io.ts";
import { blockCopyFunctions, COPY_CHUNK_BYTES } from "../runtime/sandbox/block-copy.ts";
import type { CallContext } from "@extism/extism";
import { limitsModule } from "./helpers/wat-modules.ts";

const LIMITS: SandboxLimits = { fuel: 200_000, memoryPages: 4, timeoutMs: 5_000, maxOutputBytes: 64 };

async function sandbox(limits: Partial<SandboxLimits> = {}, inWorker = false, onLog?: (level: number) => void) {
  const ends: boolean[] = [];
  const logs: number[] = [];
  const host: HostBinding = {
    functions: { hookbox_log: (_ctx, level: number) => void (logs.push(level), onLog?.(level)) },
    begin() {},
    end: (ok) => void ends.push(ok),
  };
  const all = { ...LIMITS, ...limits };
  const module = await compileInstrumented(limitsModule(), { memoryPages: all.memoryPages });
  const plugin = new WasmPlugin({ name: "wat", module, limits: all, host, inWorker });
  return { plugin, ends, logs };
}

const soon = () => Date.now() + 5_000;

describe("instrumentation", () => {
  it("is deterministic and caps memory", async () => {
    const a = await instrument(limitsModule(), { memoryPages: 4 });
    const b = await instrument(limitsModule(), { memoryPages: 4 });
    assert.deepEqual(a, b);
    const imports = WebAssembly.Module.imports(new WebAssembly.Module(a)).map((i) => `${i.module}.${i.name}`);
    assert.ok(imports.includes("hookbox:fuel.refill"));
    const c = await instrument(limitsModule(), { memoryPages: 9 });
    assert.notDeepEqual(a, c);
  });

  // The instrumenter reads every instruction to place the meters: an encoding it does not know must
  // be refused, never read as something else (that hid a loop from the meter where the runtime
  // validates multi-memory and typed references, as Deno does).
  const oneExport = (body: number[]) => {
    const code = [0x00, ...body]; // no locals
    const name = [...new TextEncoder().encode("pre_llm_call")];
    const section = (id: number, bytes: number[]) => [id, bytes.length, ...bytes];
    return new Uint8Array([
      ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
      ...section(1, [1, 0x60, 0, 1, 0x7f]),
      ...section(3, [1, 0]),
      ...section(5, [1, 0, 1]),
      ...section(7, [1, name.length, ...name, 0, 0]),
      ...section(10, [1, code.length, ...code]),
    ]);
  };
  for (const [what, body] of [
    // i32.load with a memory index (alignment flag 0x40), then loop (result i32) br 0 end
    ["a load naming a memory (multi-memory)", [0x41, 0, 0x28, 0x42, 0, 0x41, 0x03, 0x7f, 0x0c, 0, 0x0b, 0x1a, 0x1a, 0x41, 0, 0x0b]],
    // block (result (ref null func)) ref.null func end, then a loop
    ["a block typed with a typed reference", [0x02, 0x63, 0x70, 0xd0, 0x70, 0x0b, 0x1a, 0x03, 0x40, 0x0c, 0, 0x0b, 0x41, 0, 0x0b]],
  ] as const) {
    it(`refuses ${what}, whether or not this runtime would run it`, async () => {
      await assert.rejects(instrument(oneExport([...body]), { memoryPages: 1 }), (err: Error) => err.name === "InstrumentError");
    });
  }

  it("refuses a module that imports the fuel functions itself or is not WASM", async () => {
    await assert.rejects(instrument(new TextEncoder().encode("not wasm") as Uint8Array<ArrayBuffer>, { memoryPages: 1 }), /not a valid WebAssembly/);
  });
});

describe("sandboxed calls", () => {
  it("meters fuel deterministically: the same call costs the same twice", async () => {
    const { plugin } = await sandbox();
    const a = await plugin.call("count", "", soon());
    const b = await plugin.call("count", "", soon());
    assert.ok(a.fuel > 1000, `fuel ${a.fuel}`);
    assert.equal(a.fuel, b.fuel);
    assert.equal(a.output, undefined);
    await plugin.close();
  });

  // An export's end hands the instance the next call's grant, so a warm call starts without asking
  // the host (a round trip between threads in a worker): each call still gets exactly its budget.
  for (const inWorker of [false, true]) {
    it(`every call of a warm instance gets its whole budget, no more (${inWorker ? "worker" : "in-thread"})`, async () => {
      const { plugin, ends } = await sandbox({}, inWorker);
      const probe = await plugin.call("burn", "x".repeat(100), soon());
      const perByte = probe.fuel / 100;
      const fits = "x".repeat(Math.floor((0.7 * LIMITS.fuel) / perByte));
      const over = "x".repeat(Math.ceil((1.3 * LIMITS.fuel) / perByte));
      const a = await plugin.call("burn", fits, soon());
      const b = await plugin.call("burn", fits, soon());
      assert.equal(a.fuel, b.fuel);
      assert.ok(a.fuel > 0.6 * LIMITS.fuel && a.fuel < LIMITS.fuel, `fuel ${a.fuel}`);
      const e = await callFailure(plugin.call("burn", over, soon()));
      assert.equal(e.kind, "fuel");
      assert.equal((await plugin.call("burn", fits, soon())).fuel, a.fuel);
      assert.deepEqual(ends, [true, true, true, false, true]);
      await plugin.close();
    });
  }

  it("stops an endless loop at its fuel budget, the same way every time, and keeps serving", async () => {
    const { plugin, ends } = await sandbox();
    for (let i = 0; i < 2; i++) {
      const e = await callFailure(plugin.call("spin", "", soon()));
      assert.equal(e.kind, "fuel");
      assert.match(e.message, /budget 200000/);
    }
    assert.ok((await plugin.call("count", "", soon())).fuel > 0);
    assert.deepEqual(ends, [false, false, true]);
    await plugin.close();
  });

  it("stops a loop that outlives its deadline even with fuel to spare", async () => {
    const { plugin } = await sandbox({ fuel: 2 ** 40 });
    const e = await callFailure(plugin.call("spin", "", Date.now() + 30));
    assert.equal(e.kind, "timeout");
    // Its fuel counts in the plugin's stats: what it was handed (it was 0; an outside probe).
    assert.ok((e.fuel ?? 0) > 100_000, `fuel ${e.fuel}`);
  });

  it("a deadline passed after host calls ran into the last grant never says more fuel than the budget was handed out", () => {
    let now = 0;
    const meter = new FuelMeter(1_000, 4, () => now);
    meter.start(100);
    meter.functions.begin(); // the whole budget is one grant: the pool is empty
    meter.charge(500); // a host call's debt, within the grant the module's counter holds
    now = 101;
    // Host calls read the clock every 8th call (or when one is charged more than 8 plain ones).
    const moreCalls = () => {
      for (let i = 0; i < 7; i++) meter.charge(1);
    };
    assert.throws(moreCalls, (err: unknown) => err instanceof PluginCallError && err.kind === "timeout" && / 1000 of 1000 fuel units handed out\)/.test(err.message));
  });

  // A host API function may read the database or start a request: it never runs past the deadline.
  // The sandbox's own cheap functions (input, output, block copies) read the clock now and then.
  it("a host API function called after the deadline passed fails the call as timeout before it runs", async () => {
    const { plugin, logs } = await sandbox({}, false, (level) => {
      if (level !== 1) return;
      const until = Date.now() + 60;
      while (Date.now() < until); // the first call outlasts the deadline
    });
    const e = await callFailure(plugin.call("log2", "", Date.now() + 30));
    assert.equal(e.kind, "timeout");
    assert.deepEqual(logs, [1]);
    await plugin.close();
  });

  // Found by an outside probe: a module importing hookbox_kv_set with f64 parameters passed its blocks
  // as numbers, which the SDK takes as addresses too, and their bytes went uncharged.
  it("a block named by an f64 argument costs what one named by an i64 does", () => {
    const ctx = { length: (a: bigint) => (a === FIRST_BLOCK ? 160_000n : 0n) };
    assert.equal(hostCallCost(ctx, [Number(FIRST_BLOCK), 3]), hostCallCost(ctx, [FIRST_BLOCK, 3n]));
    assert.equal(hostCallCost(ctx, [FIRST_BLOCK]), HOST_CALL_FUEL + 10_000);
    assert.equal(hostCallCost(ctx, [1.5, 2 ** 40]), HOST_CALL_FUEL, "no block: an i32 or a fraction");
  });

  it("reads the clock at every host API call, every 8th cheap one and a large one", () => {
    let now = 0;
    const meter = new FuelMeter(1e9, 4, () => now);
    const armed = () => {
      now = 0;
      meter.start(100);
      meter.functions.begin();
      now = 101; // past the deadline from here on
    };
    const timeout = (err: unknown) => err instanceof PluginCallError && err.kind === "timeout";
    armed();
    for (let i = 0; i < 7; i++) meter.charge(10);
    assert.throws(() => meter.charge(10), timeout);
    armed();
    assert.throws(() => meter.charge(10, true), timeout);
    armed();
    assert.throws(() => meter.charge(8_001), timeout);
    armed();
    meter.charge(3_000);
    meter.charge(3_000);
    assert.throws(() => meter.charge(3_000), timeout); // cheap calls whose units add up
  });

  it("charges an input read by its bytes, as a copy", () => {
    const charged: number[] = [];
    const memory = new WebAssembly.Memory({ initial: 1 });
    const io = new CallIo(() => memory, 1024, (units) => void charged.push(units));
    io.begin(new Uint8Array(4_096).fill(1));
    assert.equal(io.readInput(0n, 4_096n), 4_096n);
    assert.deepEqual(charged, [HOST_CALL_FUEL + 4_096 / 16]);
  });

  it("copies a large block a chunk at a time, checking the clock in between: a check that fails stops the copy", () => {
    const len = 3 * COPY_CHUNK_BYTES;
    const block = new Uint8Array(len).fill(7);
    const ctx = { length: () => BigInt(len), read: () => ({ bytes: () => block }) } as unknown as CallContext;
    const memory = new WebAssembly.Memory({ initial: 64 });
    let checks = 0;
    const whole = blockCopyFunctions(() => memory, () => void checks++);
    assert.equal(whole.hookbox_block_read(ctx, FIRST_BLOCK, 0n, BigInt(len)), BigInt(len));
    assert.equal(checks, 2);
    new Uint8Array(memory.buffer).fill(0);
    const stopped = blockCopyFunctions(() => memory, () => {
      throw new PluginCallError("timeout", "past its deadline");
    });
    assert.throws(() => stopped.hookbox_block_read(ctx, FIRST_BLOCK, 0n, BigInt(len)), /past its deadline/);
    const mem = new Uint8Array(memory.buffer);
    assert.deepEqual([mem[COPY_CHUNK_BYTES - 1], mem[COPY_CHUNK_BYTES]], [7, 0]);
  });

  it("a call whose deadline passed before it could start fails as unavailable: the plugin never ran", async () => {
    const { plugin } = await sandbox();
    const e = await callFailure(plugin.call("count", "", Date.now() - 1));
    assert.equal(e.kind, "unavailable");
    assert.match(e.message, /waited past its deadline/);
  });

  it("a call queued behind a busy instance leaves the queue at its own deadline, as unavailable", async () => {
    const { plugin } = await sandbox({ fuel: 2 ** 40 });
    // Spins past the in-thread slice, then in a worker until its deadline: the instance stays busy.
    const busy = callFailure(plugin.call("spin", "", Date.now() + 1_500));
    const started = Date.now();
    const e = await callFailure(plugin.call("count", "", Date.now() + 300));
    assert.equal(e.kind, "unavailable", e.message);
    assert.match(e.message, /busy instance/);
    assert.ok(Date.now() - started < 1_000, "it did not wait for the busy call to end");
    assert.equal((await busy).kind, "timeout");
    await plugin.close();
  });

  it("a queued call with a far deadline waits its turn (a timer past 2^31 ms would fire at once)", async () => {
    const { plugin } = await sandbox();
    const far = Date.now() + 2 ** 33;
    const results = await Promise.all([plugin.call("count", "", far), plugin.call("count", "", far), plugin.call("count", "", far)]);
    assert.equal(results.length, 3);
    await plugin.close();
  });

  it("reports a memory bomb as a memory failure", async () => {
    const { plugin } = await sandbox();
    const e = await callFailure(plugin.call("bomb", "", soon()));
    assert.equal(e.kind, "memory");
    assert.match(e.message, /4 pages/);
  });

  it("reports a trap, then rebuilds the instance", async () => {
    const { plugin } = await sandbox();
    assert.equal((await callFailure(plugin.call("trap", "", soon()))).kind, "trap");
    await plugin.call("once", "", soon());
    assert.equal((await callFailure(plugin.call("once", "", soon()))).kind, "trap"); // same instance: global kept
    await plugin.call("once", "", soon()); // rebuilt after the trap: fresh globals
    await plugin.close();
  });

  it("refuses output beyond max_output_bytes", async () => {
    const { plugin } = await sandbox();
    const ok = await plugin.call("big", "x".repeat(10), soon());
    assert.equal(ok.output?.length, 10);
    const e = await callFailure(plugin.call("big", "x".repeat(100), soon()));
    assert.equal(e.kind, "bad_output");
    await plugin.close();
  });

  it("a warm in-thread instance answers at once (no promise), and its failures still come back typed", async () => {
    const { plugin, ends } = await sandbox();
    // The first call goes through the SDK (it hands over the instance's kernel context).
    const first = plugin.callNow("big", "abc", soon());
    assert.ok(first instanceof Promise);
    await first;
    // Building the instance counts as in-thread work: on a loaded machine it can pass the stretch
    // after which the next call waits for the event loop to turn. Let it turn, so the call is warm
    // with no turn due (the case this checks).
    await turnEventLoop();
    const warm = plugin.callNow("big", "abcd", soon());
    assert.ok(!(warm instanceof Promise), "a warm call answers synchronously");
    assert.equal((warm as { output?: string }).output, "\0".repeat(4)); // big: as many zero bytes as its input
    // A refused output and a trap on that path: a rejected promise, never a throw; then a fresh instance.
    const refused = plugin.callNow("big", "x".repeat(100), soon());
    assert.ok(refused instanceof Promise);
    assert.equal((await callFailure(refused)).kind, "bad_output");
    assert.equal((await callFailure(Promise.resolve().then(() => plugin.callNow("trap", "", soon())))).kind, "trap");
    assert.equal((await plugin.call("big", "again", soon())).output?.length, 5);
    assert.deepEqual(ends, [true, true, false, false, true]);
    await plugin.close();
  });

  it("a warm in-thread call starts without the blocks of the calls before it (the SDK's block numbers start over)", async () => {
    const { plugin } = await sandbox();
    const where = async () => (await plugin.callNow("where", "", soon())).output;
    const first = await where(); // through the SDK's call()
    assert.equal(first?.length, 8);
    await turnEventLoop();
    // Direct calls, with calls that make no block and a refused output between them: each "where"
    // gets the block number the first one got.
    for (let i = 0; i < 4; i++) {
      assert.equal(await where(), first, `call ${i + 2}`);
      await plugin.callNow("count", "", soon());
      assert.equal((await callFailure(Promise.resolve().then(() => plugin.callNow("big", "x".repeat(100), soon())))).kind, "bad_output");
    }
    await plugin.close();
  });

  it("without the SDK's CallContext steps (another SDK version) there is no direct caller: calls stay on the SDK's call()", async () => {
    assert.equal(directCaller({} as CallContext, {}), undefined);
    class Partial {
      [Symbol("reset")]() {}
      [Symbol("begin")]() {}
    }
    assert.equal(directCaller(new Partial() as unknown as CallContext, {}), undefined);
  });

  it("a host whose commit throws at once fails the call, and hears of its end once", async () => {
    const ends: boolean[] = [];
    const host: HostBinding = {
      functions: { hookbox_log: () => undefined },
      begin() {},
      end(ok) {
        ends.push(ok);
        if (ok) throw new PluginCallError("unavailable", "database gone");
      },
    };
    const module = await compileInstrumented(limitsModule(), { memoryPages: LIMITS.memoryPages });
    const plugin = new WasmPlugin({ name: "wat", module, limits: LIMITS, host, inWorker: false });
    for (let i = 0; i < 2; i++) assert.equal((await callFailure(plugin.call("count", "", soon()))).kind, "unavailable"); // SDK, then direct
    assert.deepEqual(ends, [true, true]);
    await plugin.close();
  });

  it("serializes concurrent calls and reaches host functions", async () => {
    const { plugin, logs } = await sandbox();
    await Promise.all([plugin.call("log", "", soon()), plugin.call("log", "", soon()), plugin.call("count", "", soon())]);
    assert.deepEqual(logs, [1, 1]);
    await plugin.close();
  });
});

// Linux: the process's threads, one per worker thread among them.
const threads = () => readdirSync("/proc/self/task").length;

describe("worker threads and closing", { skip: !existsSync("/proc/self/task") }, () => {
  it("a plugin closed while its worker instance is being built keeps no worker thread", async () => {
    const first = await sandbox({}, true); // lazy threads of the first worker start (and its bundle) now
    await first.plugin.warm();
    await first.plugin.close();
    const before = threads();
    const { plugin } = await sandbox({}, true);
    const warming = plugin.warm().catch((err: Error) => err);
    await plugin.close();
    assert.match(String(await warming), /closed/);
    for (let i = 0; i < 100 && threads() > before; i++) await new Promise((r) => setTimeout(r, 30));
    assert.ok(threads() <= before, `${threads()} threads, ${before} before`);
  });
});

// A CLI run (hookbox plugins call, turn...) ends when its work is done, whether or not it closed
// every plugin: an idle worker does not hold the process, and one running a call does.
describe("worker threads and the process", () => {
  it("a process whose worker instance answered and sits idle exits by itself; the call's answer was awaited", async () => {
    const { spawn } = await import("node:child_process");
    const { fileURLToPath } = await import("node:url");
    const root = fileURLToPath(new URL("..", import.meta.url));
    const script = `
      import { compileInstrumented } from "./runtime/sandbox/module-cache.ts";
      import { WasmPlugin } from "./runtime/sandbox/wasm-plugin.ts";
      import { limitsModule } from "./test/helpers/wat-modules.ts";
      const module = await compileInstrumented(limitsModule(), { memoryPages: 4 });
      const host = { functions: { hookbox_log: () => undefined }, begin() {}, end() {} };
      const plugin = new WasmPlugin({ name: "wat", module, limits: { fuel: 200000, memoryPages: 4, timeoutMs: 5000, maxOutputBytes: 64 }, host, inWorker: true });
      const r = await plugin.call("count", "", Date.now() + 5000);
      console.log("answered", r.fuel > 0);
    `;
    const isDeno = "Deno" in globalThis;
    const argv = isDeno ? ["eval", "--ext=ts", script] : ["--import", "tsx", "--input-type=module", "-e", script];
    const child = spawn(process.execPath, argv, { cwd: root, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DENO_NO_UPDATE_CHECK: "1" } });
    let out = "";
    child.stdout!.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr!.on("data", (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const code = await exited;
    clearTimeout(timer);
    assert.equal(code, 0, `the process did not end by itself: ${out}`);
    assert.match(out, /answered true/);
  });
});
