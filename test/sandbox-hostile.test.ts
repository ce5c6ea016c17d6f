// Hostile modules written as WebAssembly text (test/fixtures/hostile/*.wat), one per attack class
// of issue 9, against the sandbox alone: each is stopped with its typed failure, within its
// deadline, and the host (this process) stays usable. Loader and command classes live in
// test/sandbox-loader.test.ts and test/sandbox-commands.test.ts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { callFailure } from "./helpers/call-failure.ts";
import type { CallContext } from "@extism/extism";
import type { HostBinding, HostFunction } from "../host-api/binding.ts";
import { readText, storeText } from "../host-api/memory.ts";
import { HOST_FUNCTION_NAMES } from "../host-api/functions.ts";
import { PluginCallError } from "../hooks/failures.ts";
import { instrument, MAX_MODULE_BYTES } from "../runtime/sandbox/instrument.ts";
import { MAX_BLOCK_ARITY, MAX_ELEMENT_ENTRIES, MAX_ELEMENT_SEGMENTS, MAX_EXPORTS, MAX_FUNCTIONS, MAX_GLOBALS, MAX_IMPORTS, MAX_LOCALS, MAX_TABLES, MAX_TYPE_PARAMS, MAX_TYPE_RESULTS, MAX_TYPES } from "../runtime/sandbox/module-shape.ts";
import { compileInstrumented } from "../runtime/sandbox/module-cache.ts";
import { MAX_CALL_BLOCKS } from "../runtime/sandbox/fuel.ts";
import { HOST_MODULE } from "../runtime/sandbox/imports.ts";
import { MAX_ERROR_CHARS } from "../runtime/sandbox/call-failure.ts";
import { CAN_SUSPEND, WasmPlugin, WORKER_GRACE_MS, type SandboxLimits } from "../runtime/sandbox/wasm-plugin.ts";
import { LOG_BURST, LOG_LINES_PER_SECOND } from "../runtime/sandbox/log-budget.ts";
import { WorkerInstance } from "../runtime/sandbox/worker-instance.ts";
import { codeHeavyModule, hostileModule, manyItemsModule, manyLocalsModule, oneBodyModule, nestedBlocksModule } from "./helpers/wat-modules.ts";
import { Op, Writer, writeModule } from "../runtime/sandbox/wasm-binary.ts";

const LIMITS: SandboxLimits = { fuel: 100_000_000, memoryPages: 64, timeoutMs: 2_000, maxOutputBytes: 64 * 1024 };

async function sandbox(
  name: string,
  opts: { limits?: Partial<SandboxLimits>; functions?: Record<string, HostFunction>; blockAnswers?: string[]; inWorker?: boolean; rewind?: boolean; end?: (ok: boolean) => void } = {},
) {
  const logs: string[] = [];
  const ends: boolean[] = [];
  const host: HostBinding = {
    functions: { hookbox_log: () => void logs.push("line"), ...opts.functions },
    blockAnswers: new Set(opts.blockAnswers),
    begin() {},
    end: (ok) => {
      ends.push(ok);
      opts.end?.(ok);
    },
    log: (_level, _source, message) => void logs.push(message),
  };
  const limits = { ...LIMITS, ...opts.limits };
  const module = await compileInstrumented(hostileModule(name), { memoryPages: limits.memoryPages });
  // Suspending by rewinding (sandbox/rewind.ts), as on a runtime without JSPI, whatever this one has.
  const rewindable = opts.rewind ? await compileInstrumented(hostileModule(name), { memoryPages: limits.memoryPages }, [`${HOST_MODULE}.hookbox_http`]) : undefined;
  return { plugin: new WasmPlugin({ name, module, limits, host, inWorker: opts.inWorker ?? false, ...(rewindable ? { rewindable } : {}) }), logs, ends };
}

/**
 * lateinput's call, suspended in hookbox_http while another plugin runs calls with other payloads,
 * outputs its own call's input once it resumes.
 */
async function readsOwnInputAfterAwait(where: { inWorker?: boolean; rewind?: boolean }): Promise<void> {
  let answer!: () => void;
  const answered = new Promise<void>((resolve) => (answer = resolve));
  const slow = await sandbox("lateinput", { ...where, functions: { hookbox_http: async () => (await answered, 0n) } });
  const { plugin: fast } = await sandbox("tamper");
  const own = JSON.stringify({ hook: "post_llm_call", session_id: "s_slow", secret: "A".repeat(200) });
  await fast.call("echo", "warm", Date.now() + 5_000); // later calls take the synchronous path
  const late = slow.plugin.call("late_echo", own, Date.now() + 5_000);
  await new Promise((r) => setTimeout(r, 50)); // the slow call is suspended in hookbox_http
  for (let i = 0; i < 5; i++) {
    const other = JSON.stringify({ hook: "post_llm_call", session_id: `s_fst${i}`, secret: String(i).repeat(200) });
    assert.equal((await fast.call("echo", other, Date.now() + 5_000)).output, other);
  }
  answer();
  assert.equal((await late).output, own);
  await slow.plugin.close();
  await fast.close();
}

/**
 * Calls `fn` of hostile module `name` (it must succeed by the deadline) and checks that at most the
 * burst, plus the bucket's refill while the call ran, of its `line`s reached the host, and that the
 * drop was reported. (About 10 ms in-thread; a call that outgrew its slice on a busy machine runs
 * again in a worker.)
 */
async function assertRateLimited(name: string, fn: string, line: string, inWorker: boolean, deadlineMs: number): Promise<void> {
  const { plugin, logs } = await sandbox(name, { inWorker });
  const t0 = performance.now();
  await plugin.call(fn, "", Date.now() + deadlineMs);
  const seconds = (performance.now() - t0) / 1000;
  const lines = logs.filter((l) => l === line).length;
  assert.ok(lines <= LOG_BURST + LOG_LINES_PER_SECOND * seconds + 5, `${lines} lines reached the host in ${seconds.toFixed(2)} s`);
  assert.ok(logs.some((l) => /log lines dropped \(rate limit\)/.test(l)));
  await plugin.close();
}

/** The longest gap between event-loop turns while `work` runs (a blocked loop shows up here). */
async function longestStall(work: Promise<unknown>): Promise<number> {
  let last = performance.now();
  let worst = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 5);
  try {
    await work.catch(() => undefined);
  } finally {
    clearInterval(tick);
  }
  return Math.max(worst, performance.now() - last);
}

describe("hostile modules: freeze", () => {
  for (const fn of ["fill", "copy"]) {
    it(`memory.${fn} of 1 MiB in a loop is charged by length: out of fuel`, async () => {
      const { plugin } = await sandbox("bulk");
      const t0 = performance.now();
      const e = await callFailure(plugin.call(fn, "", Date.now() + 10_000));
      assert.equal(e.kind, "fuel");
      // 100 M units at 16 bytes a unit: about 1.6 GB moved, not 100 M MiB.
      assert.ok(performance.now() - t0 < 5_000, `took ${performance.now() - t0} ms`);
      await plugin.close();
    });
  }

  it("one memory.fill of 60 MiB runs in metered chunks; chunked copies and fills land exactly where the instructions put them", async () => {
    const { plugin, logs } = await sandbox("bigbulk", { limits: { memoryPages: 1024, fuel: 1_000_000_000 } });
    // One instruction used to be one stretch nothing could cut (230 ms of the host's thread).
    const stall = await longestStall(plugin.call("one_fill", "", Date.now() + 10_000));
    console.log(`one 60 MiB memory.fill: longest event-loop stall ${stall.toFixed(1)} ms; ${logs.filter((l) => l.includes("in-thread slice")).length ? "moved to a worker" : "stayed in-thread"}`);
    await plugin.call("overlap", "", Date.now() + 10_000); // returns 1 (a failed call) if any byte is wrong
    assert.equal((await callFailure(plugin.call("oob", "", Date.now() + 10_000))).kind, "trap");
    await plugin.close();
  });

  it("bulk operations with fuel to spare stop at the deadline, checked often", async () => {
    const { plugin } = await sandbox("bulk", { limits: { fuel: 2 ** 40 } });
    const t0 = performance.now();
    const e = await callFailure(plugin.call("fill", "", Date.now() + 300));
    const ms = performance.now() - t0;
    assert.equal(e.kind, "timeout");
    console.log(`bulk fill with unlimited fuel stopped after ${ms.toFixed(0)} ms (deadline 300 ms)`);
    assert.ok(ms < 1_500, `stopped after ${ms} ms`);
    await plugin.close();
  });

  it("a flood of kernel calls costs fuel: stopped", async () => {
    // 10,000 allocs' worth of fuel: it runs out before the block count's cap.
    const { plugin } = await sandbox("hostcalls", { limits: { fuel: 10_000_000 } });
    const e = await callFailure(plugin.call("alloc_flood", "", Date.now() + 10_000));
    assert.equal(e.kind, "fuel");
    await plugin.close();
  });

  // The SDK keeps every block of a call as an object on the host (~0.5 KB each, freed or not): with
  // the manifest's largest fuel budget, empty allocs held ~480 MB of the host's memory per call.
  for (const inWorker of [false, true]) {
    it(`a flood of empty kernel allocs stops at MAX_CALL_BLOCKS in one call, whatever the fuel (${inWorker ? "worker" : "in-thread"})`, async () => {
      const { plugin } = await sandbox("hostcalls", { limits: { fuel: 1_000_000_000, memoryPages: 1024, timeoutMs: 10_000 }, inWorker });
      const before = process.memoryUsage().rss;
      const e = await callFailure(plugin.call("alloc_flood", "", Date.now() + 10_000));
      assert.equal(e.kind, "memory", e.message);
      assert.match(e.message, new RegExp(`more than ${MAX_CALL_BLOCKS.toLocaleString("en-US")} blocks in one call`));
      assert.ok(process.memoryUsage().rss - before < 128 * 1024 * 1024, `rss grew ${((process.memoryUsage().rss - before) / 1e6).toFixed(0)} MB`);
      await plugin.call("log_flood", "", Date.now() + 10_000); // the next call runs on a fresh instance
      await plugin.close();
    });
  }

  it("a start function that never returns is stopped at instantiation: by the slice, the deadline or fuel", async () => {
    const { plugin } = await sandbox("start", { limits: { fuel: 2 ** 40, timeoutMs: 5_000 } });
    const t0 = performance.now();
    await assert.rejects(plugin.warm(), /instantiation failed: the start function ran past the 50 ms in-thread slice/);
    assert.ok(performance.now() - t0 < 1_500);
    const { plugin: short } = await sandbox("start", { limits: { fuel: 2 ** 40, timeoutMs: 20 } });
    await assert.rejects(short.warm(), /instantiation failed: ran past its time limit of 20 ms \(limits.timeout_seconds/);
    const { plugin: metered } = await sandbox("start", { limits: { fuel: 5_000_000 } });
    await assert.rejects(metered.warm(), /instantiation failed: ran out of fuel/);
  });

  it("after a start-up (hookbox_initialize) that failed, every later call runs in the instance built after it", async () => {
    let builds = 0;
    const { plugin } = await sandbox("initfail", { functions: { next_id: () => ++builds } });
    await assert.rejects(plugin.call("who", "", Date.now() + 5_000), /start-up \(_initialize\) failed: unreachable/);
    // The first answer comes through the SDK, the later ones synchronously: all from instance 2.
    for (let i = 0; i < 3; i++) assert.equal((await plugin.callNow("who", "", Date.now() + 5_000)).output, "2");
    assert.equal(builds, 2);
    await plugin.close();
  });
});

describe("hostile modules: host memory and outputs", () => {
  it("a kernel alloc beyond the memory allowance fails as memory, without the block", async () => {
    const { plugin } = await sandbox("hostcalls");
    const before = process.memoryUsage().rss;
    const e = await callFailure(plugin.call("alloc_huge", "", Date.now() + 5_000));
    assert.equal(e.kind, "memory");
    assert.match(e.message, /kernel alloc/);
    assert.ok(process.memoryUsage().rss - before < 256 * 1024 * 1024, "no 1 GiB block was made");
    await plugin.close();
  });

  it("one kernel block may hold at most KERNEL_BLOCK_BYTES whatever the allowance (a worker copies each to the host's thread)", async () => {
    const { plugin } = await sandbox("hostcalls", { limits: { memoryPages: 1024 } });
    const e = await callFailure(plugin.call("alloc_block_over", "", Date.now() + 5_000));
    assert.equal(e.kind, "memory");
    assert.match(e.message, /one block beyond 16 MiB/);
    await plugin.call("alloc_block_within", "", Date.now() + 5_000);
    await plugin.close();
  });

  it("functions reached through funcref globals keep the shim and their identity", async () => {
    const { plugin } = await sandbox("funcref", { limits: { fuel: 2_000_000 } });
    const huge = await callFailure(plugin.call("alloc_huge_indirect", "", Date.now() + 5_000));
    assert.equal(huge.kind, "memory", huge.message);
    assert.match(huge.message, /kernel alloc/);
    // The global's own function answers (7, a non-zero status), not a fuel function in its place.
    assert.match((await callFailure(plugin.call("call_seven", "", Date.now() + 5_000))).message, /returned 7/);
    const started = Date.now();
    const spin = await callFailure(plugin.call("spin_seven", "", Date.now() + 5_000));
    assert.equal(spin.kind, "fuel", spin.message);
    assert.ok(Date.now() - started < 2_000, "stopped by its fuel, long before the deadline");
    await plugin.close();
  });

  it("blocks the host makes for its answers count towards the memory allowance", async () => {
    const value = "v".repeat(256 * 1024);
    const { plugin } = await sandbox("answers", { functions: { hookbox_kv_get: (ctx: CallContext) => storeText(ctx, value) }, blockAnswers: ["hookbox_kv_get"] });
    const before = process.memoryUsage().rss;
    // 8,000 answers of 256 KiB would be 2 GiB; the allowance is 64 pages (4 MiB).
    const e = await callFailure(plugin.call("many_gets", "", Date.now() + 10_000));
    assert.equal(e.kind, "memory", e.message);
    assert.match(e.message, /host function answers/);
    assert.ok(process.memoryUsage().rss - before < 256 * 1024 * 1024, "stopped after a few MiB of answers");
    await plugin.close();
    // Many empty answers are counted, not only their bytes.
    const small = await sandbox("answers", { functions: { hookbox_kv_get: (ctx: CallContext) => storeText(ctx, "") }, blockAnswers: ["hookbox_kv_get"], limits: { fuel: 1_000_000_000 } });
    const many = await callFailure(small.plugin.call("many_small_gets", "", Date.now() + 10_000));
    assert.equal(many.kind, "memory", many.message);
    assert.match(many.message, new RegExp(`more than ${MAX_CALL_BLOCKS.toLocaleString("en-US")} blocks in one call`));
    await small.plugin.close();
    // The module's blocks and the answers share the SDK's numbering: 20,000 of each fail as memory
    // (counted apart, answer 16,384 came back empty: a wrong answer, not a failure), in a worker too.
    for (const inWorker of [false, true]) {
      const mixed = await sandbox("answers", { functions: { hookbox_kv_get: (ctx: CallContext) => storeText(ctx, "v") }, blockAnswers: ["hookbox_kv_get"], limits: { fuel: 1_000_000_000 }, inWorker });
      const both = await callFailure(mixed.plugin.call("allocs_and_gets", "", Date.now() + 10_000));
      assert.equal(both.kind, "memory", both.message);
      assert.match(both.message, new RegExp(`more than ${MAX_CALL_BLOCKS.toLocaleString("en-US")} blocks`));
      await mixed.plugin.close();
    }
    // A number that looks like a block address (a counter past 2^48) is not an answer block.
    const counter = await sandbox("answers", { functions: { hookbox_kv_get: () => (1n << 48n) + 7n } });
    await counter.plugin.call("many_gets", "", Date.now() + 10_000);
    await counter.plugin.close();
  });

  it("a 1 MiB error text (error_set or hookbox_abort) is cut to MAX_ERROR_CHARS and says so, in a worker too", async () => {
    for (const inWorker of [false, true]) {
      const { plugin } = await sandbox("hostcalls", { inWorker });
      for (const fn of ["big_error", "big_abort"]) {
        const e = await callFailure(plugin.call(fn, "", Date.now() + 10_000));
        const where = `${fn}${inWorker ? " in a worker" : ""}`;
        assert.equal(e.kind, "trap", where);
        assert.ok(e.message.length <= MAX_ERROR_CHARS + 20, `${where}: message of ${e.message.length} chars`);
        assert.match(e.message, /x{900}.*truncated/, where);
      }
      await plugin.close();
    }
  });

  // Stored (a quarantine reason), a NUL cut the text short on the embedded file (an outside probe's
  // hookbox_abort(0) was persisted as "\u0000").
  it("a NUL in an error text becomes U+FFFD", async () => {
    const { plugin } = await sandbox("nulerror");
    const e = await callFailure(plugin.call("fail", "", Date.now() + 10_000));
    assert.equal(e.message, "plugin error: bad\uFFFDmessage");
    await plugin.close();
  });

  // In a worker each of the 20,000 lines is a host call to this thread, a round trip: the call still
  // ends within its deadline (the Extism SDK's own worker sent every block both ways per host call).
  for (const inWorker of [false, true]) {
    it(`a log flood is rate limited and the drop is counted (${inWorker ? "worker" : "in-thread"})`, async () => {
      await assertRateLimited("hostcalls", "log_flood", "line", inWorker, 10_000);
    });
  }

  it("kernel vars are refused (their keys were never counted)", async () => {
    const { plugin } = await sandbox("vars");
    await assert.rejects(plugin.warm(), /imports unknown host function "extism:host\/env" "var_set"/);
  });

  it("tables are capped: table.grow by 10 M elements fails, a 10 M table is refused", async () => {
    const { plugin } = await sandbox("tables");
    await plugin.call("grow", "", Date.now() + 5_000); // traps unless table.grow returned -1
    await plugin.close();
    await assert.rejects(instrument(hostileModule("bigtable"), { memoryPages: 4 }), /table needs 10000000 elements at start, limit is 65536/);
  });

  it("a module just under MAX_MODULE_BYTES is instrumented and compiled while the event loop keeps turning", async () => {
    const big = codeHeavyModule(MAX_MODULE_BYTES - 64 * 1024); // and without a memory: grow_check must still validate
    assert.ok(big.byteLength > MAX_MODULE_BYTES - 128 * 1024 && big.byteLength <= MAX_MODULE_BYTES, `${big.byteLength} bytes`);
    const compiling = compileInstrumented(big, { memoryPages: 4 });
    const stall = await longestStall(compiling);
    console.log(`4 MiB module: longest event-loop stall while instrumenting and compiling ${stall.toFixed(1)} ms`);
    // One piece of work at once held it ~1 s; sliced, 40-140 ms on an idle 2-core machine and up to
    // ~180 ms while other processes load it (V8 finishes the compile on this thread): a wide bound.
    assert.ok(stall < 400, `event loop stalled ${stall} ms`);
    assert.ok(WebAssembly.Module.exports(await compiling).length === 0);
  });

  // Each export gets a wrapper, each kernel log import a shim, and an export's signature was looked
  // up by decoding the whole type section again: 4,096 exports x 10,000 types held the thread for
  // minutes. Counts past what any compiler emits are refused; within them the loop keeps turning.
  it("a module of many types, exports and imports is instrumented and compiled while the event loop keeps turning", async () => {
    const many = manyItemsModule({ types: MAX_TYPES, exports: MAX_EXPORTS, imports: MAX_IMPORTS });
    const compiling = compileInstrumented(many, { memoryPages: 4 });
    const stall = await longestStall(compiling);
    console.log(`${MAX_TYPES} types, ${MAX_EXPORTS} exports, ${MAX_IMPORTS} imports: longest event-loop stall ${stall.toFixed(1)} ms`);
    // The bound leaves room for a loaded machine (152 ms seen with two other test processes running);
    // unsliced, this work held the thread for minutes.
    assert.ok(stall < 400, `event loop stalled ${stall} ms`);
    assert.equal(WebAssembly.Module.exports(await compiling).length, MAX_EXPORTS);
  });

  it("a module with more types, exports, imports, functions, globals or element entries than any compiler emits is refused, naming the count and the limit", async () => {
    const refused = (counts: Parameters<typeof manyItemsModule>[0], message: string) => assert.rejects(instrument(manyItemsModule(counts), { memoryPages: 4 }), new RegExp(message));
    await refused({ types: MAX_TYPES + 1 }, `module has ${MAX_TYPES + 1} function types, limit is ${MAX_TYPES}`);
    await refused({ exports: MAX_EXPORTS + 1 }, `module has ${MAX_EXPORTS + 1} exports, limit is ${MAX_EXPORTS}`);
    await refused({ imports: MAX_IMPORTS + 1 }, `module has ${MAX_IMPORTS + 1} imports, limit is ${MAX_IMPORTS}`);
    await refused({ functions: MAX_FUNCTIONS + 1 }, `module has ${MAX_FUNCTIONS + 1} functions, limit is ${MAX_FUNCTIONS}`);
    await refused({ globals: MAX_GLOBALS + 1 }, `module has ${MAX_GLOBALS + 1} globals, limit is ${MAX_GLOBALS}`);
    await refused({ functions: 1, elements: MAX_ELEMENT_SEGMENTS + 1 }, `module has ${MAX_ELEMENT_SEGMENTS + 1} element segments, limit is ${MAX_ELEMENT_SEGMENTS}`);
    await refused({ functions: 1, elements: 2, entries: MAX_ELEMENT_ENTRIES / 2 + 1 }, `element segments hold more than ${MAX_ELEMENT_ENTRIES} entries`);
    // At the limits it loads.
    await instrument(manyItemsModule({ functions: MAX_FUNCTIONS, globals: MAX_GLOBALS, elements: 2, entries: MAX_ELEMENT_ENTRIES / 2 }), { memoryPages: 4 });
  });

  // What V8 spends validating a module grows with the values its blocks and calls move: 20,000
  // blocks typed (1,000 i32) -> (1,000 i32), a 65 KB module, held the thread 3.5 s and 700 MB in
  // WebAssembly.validate (1.4 M of them: 23.7 GB, the process killed). Wide types are refused
  // before anything but hookbox's own reader looks at the code.
  it("a module of blocks of a wide type is refused before V8 validates it, with the event loop turning", async () => {
    const blocks = (n: number, type: number) => {
      const w = new Writer();
      for (let i = 0; i < n; i++) w.byte(Op.Block).u32(type).byte(Op.End);
      return w;
    };
    const wide = oneBodyModule(blocks(20_000, 1), [[1000, 1000]]);
    const stall = await longestStall(assert.rejects(compileInstrumented(wide, { memoryPages: 4 }), new RegExp(`module has 1000 parameters in a function type, limit is ${MAX_TYPE_PARAMS}`)));
    console.log(`20,000 blocks of a 1,000-value type: refused, longest event-loop stall ${stall.toFixed(1)} ms`);
    assert.ok(stall < 400, `event loop stalled ${stall} ms`);
    await assert.rejects(instrument(oneBodyModule(new Writer(), [[0, MAX_TYPE_RESULTS + 1]]), { memoryPages: 4 }), new RegExp(`results in a function type, limit is ${MAX_TYPE_RESULTS}`));
    // Within the type limits, a block of more than MAX_BLOCK_ARITY values is refused too.
    const half = MAX_BLOCK_ARITY / 2 + 1;
    const params = new Writer();
    for (let i = 0; i < half; i++) params.byte(Op.I32Const).i32(0);
    const typed = new Writer().raw(params.view()).raw(blocks(1, 1).view());
    for (let i = 0; i < half; i++) typed.byte(0x1a); // drop
    await assert.rejects(instrument(oneBodyModule(typed, [[half, half]]), { memoryPages: 4 }), new RegExp(`module has a block of ${2 * half} values \\(type 1\\), limit is ${MAX_BLOCK_ARITY}`));
  });

  // One function body may be the whole 4 MiB module: it is read and written in stretches with the
  // loop turning between them, and one whose meters alone would pass the metered size is refused.
  // V8 zeroes a function's locals at every call and compiles it, on its first call, on the calling
  // thread, in time that grows with them; neither ran an instruction the meter counted (outside
  // probe: 1,000 functions of 50,000 locals, a 16 KB module, held the thread 9-14 s on one first
  // call; a loop calling such a function ran seconds between refills, and so between clock checks).
  it("locals cost fuel at every call, and a module declaring more than MAX_LOCALS in all is refused", async () => {
    await assert.rejects(compileInstrumented(manyLocalsModule(1_000, 50_000, 1), { memoryPages: 1 }), new RegExp(`functions declare more than ${MAX_LOCALS} locals`));
    const module = await compileInstrumented(manyLocalsModule(4, 40_000, 1_000), { memoryPages: 1 });
    const host: HostBinding = { functions: {}, begin() {}, end() {} };
    const plugin = new WasmPlugin({ name: "locals", module, limits: LIMITS, host });
    try {
      const { fuel } = await plugin.call("run", "", Date.now() + 30_000);
      // 1,003 calls of 40,000 locals each: a unit per 8 of them at every call (a few units before).
      assert.ok(fuel >= 1_003 * 5_000, `fuel ${fuel}`);
      const tight = new WasmPlugin({ name: "locals", module, limits: { ...LIMITS, fuel: 1_000_000 }, host });
      assert.equal((await callFailure(tight.call("run", "", Date.now() + 30_000))).kind, "fuel");
      await tight.close();
    } finally {
      await plugin.close();
    }
  });

  it("a 4 MiB function body of nops is instrumented, and one of loops refused, with the event loop turning", async () => {
    const n = MAX_MODULE_BYTES - 1024;
    const nops = new Writer(n + 16);
    for (let i = 0; i < n; i++) nops.byte(0x01);
    const nopStall = await longestStall(compileInstrumented(oneBodyModule(nops), { memoryPages: 4 }));
    const loops = new Writer(n + 16);
    for (let i = 0; i < Math.floor(n / 3); i++) loops.byte(Op.Loop).byte(0x40).byte(Op.End);
    const loopModule = oneBodyModule(loops);
    const loopStall = await longestStall(assert.rejects(compileInstrumented(loopModule, { memoryPages: 4 }), /bytes once metered/));
    console.log(`one 4 MiB body: nops stall ${nopStall.toFixed(1)} ms, loops (refused) stall ${loopStall.toFixed(1)} ms`);
    // Each body in one stretch would hold the thread for most of a second; sliced, tens of ms on a
    // quiet machine (152 ms seen with two other test processes running): a wide bound.
    assert.ok(nopStall < 400 && loopStall < 400, `event loop stalled ${nopStall} / ${loopStall} ms`);
  });

  // Found by a review: an over-long LEB read as NaN made a section size or count that looped for
  // ever (6 GB), and an export of a function that does not exist wrote an endless LEB.
  it("malformed modules are refused at once: an over-long LEB, an export of no function, a body closing more blocks than it opens", async () => {
    const header = [0, 0x61, 0x73, 0x6d, 1, 0, 0, 0];
    const longLeb = [...new Array<number>(150).fill(0x80), 0x00];
    await assert.rejects(instrument(new Uint8Array([...header, 0x00, ...longLeb]), { memoryPages: 4 }), /not a valid WebAssembly module \(a u32 longer than 5 bytes\)/);
    await assert.rejects(instrument(new Uint8Array([...header, 6, longLeb.length, ...longLeb]), { memoryPages: 4 }), /u32 longer than 5 bytes/);
    const exportOfNone = [...header, 1, 4, 1, 0x60, 0, 0, 7, 5, 1, 1, 0x66, 0, 5];
    await assert.rejects(instrument(new Uint8Array(exportOfNone), { memoryPages: 4 }), /function 5 does not exist/);
    const closes = new Writer().byte(Op.End).byte(Op.End).byte(Op.Block).byte(0x40).byte(Op.Block).byte(0x40).byte(Op.End);
    await assert.rejects(instrument(oneBodyModule(closes), { memoryPages: 4 }), /closes more blocks than it opens/);
  });

  it("a module hookbox's reader takes but V8 does not is refused as not valid, when compiled", async () => {
    const call = new Writer().byte(Op.Call).u32(99); // no function 99
    await assert.rejects(compileInstrumented(oneBodyModule(call), { memoryPages: 4 }), /not a valid WebAssembly module \(.+\)/);
  });

  // An outside probe: global index 0 in a module with no globals was the fuel counter once
  // instrumented (valid there), and a loop resetting it ran for ever on the server's thread.
  it("an index past the module's own globals or functions is refused, never bound to what metering added", async () => {
    const reset = new Writer().byte(Op.Loop).byte(0x40).byte(Op.I32Const).i32(1_000_000).byte(Op.GlobalSet).u32(0).byte(Op.Br).u32(0).byte(Op.End);
    await assert.rejects(compileInstrumented(oneBodyModule(reset), { memoryPages: 4 }), /not a valid WebAssembly module \(.+\)/);
    const wrapper = new Writer().byte(Op.Call).u32(1); // one past "run": a wrapper once instrumented
    await assert.rejects(compileInstrumented(oneBodyModule(wrapper), { memoryPages: 4 }), /not a valid WebAssembly module \(.+\)/);
  });

  it("a module importing the kernel's alloc twice, more tables than MAX_TABLES or an overlong import name is refused", async () => {
    const types = new Writer().u32(1).byte(0x60).u32(1).byte(0x7e).u32(1).byte(0x7e).toBytes(); // (i64) -> i64
    const imports = (...names: string[]) => {
      const w = new Writer().u32(names.length);
      for (const n of names) w.name("extism:host/env").name(n).byte(0).u32(0);
      return w.toBytes();
    };
    const withSections = (...sections: Array<{ id: number; body: Uint8Array }>) => writeModule(sections);
    // A second alloc would have reached the kernel past the capped alloc_shim (2 GB from a 4 MiB allowance).
    await assert.rejects(instrument(withSections({ id: 1, body: types }, { id: 2, body: imports("alloc", "alloc") }), { memoryPages: 4 }), /imports "extism:host\/env" "alloc" more than once/);
    const tables = new Writer().u32(MAX_TABLES + 1);
    for (let i = 0; i <= MAX_TABLES; i++) tables.byte(0x70).byte(0x00).u32(1);
    await assert.rejects(instrument(withSections({ id: 4, body: tables.toBytes() }), { memoryPages: 4 }), new RegExp(`module has ${MAX_TABLES + 1} tables, limit is ${MAX_TABLES}`));
    const long = "x".repeat(1_000_000);
    const err = await instrument(withSections({ id: 1, body: types }, { id: 2, body: imports(long) }), { memoryPages: 4 }).then(() => undefined, (e: Error) => e);
    assert.match(String(err?.message), /imports a name longer than 256 characters/);
    assert.ok(err!.message.length < 300, `the error quotes ${err!.message.length} characters`);
  });

  it("a module beyond MAX_MODULE_BYTES is refused before it is compiled", async () => {
    const big = new Uint8Array(MAX_MODULE_BYTES + 64);
    big.set([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]);
    await assert.rejects(instrument(big, { memoryPages: 4 }), /exceeds the limit of 4194304 bytes/);
  });
});

describe("hostile modules: tampering", () => {
  // The kernel's input functions are the sandbox's (call-io.ts), in-thread and in a worker alike.
  for (const inWorker of [false, true]) {
    const where = inWorker ? "worker" : "in-thread";
    it(`a plugin that scribbles over its input does not change what the next plugin reads (${where})`, async () => {
      const { plugin } = await sandbox("tamper", { inWorker });
      const payload = JSON.stringify({ hook: "pre_llm_call", user_message: "the user's own words" });
      await plugin.call("scribble", payload, Date.now() + 5_000);
      assert.equal((await plugin.call("echo", payload, Date.now() + 5_000)).output, payload);
      // Within one call too: its input block is a copy of its own, the loads read the input as given.
      assert.equal((await plugin.call("scribble_echo", payload, Date.now() + 5_000)).output, payload);
      // No kernel block holds the input the module reads (a worker's SDK call stored it as block 1).
      assert.equal((await plugin.call("poke_echo", payload, Date.now() + 5_000)).output, payload);
      await plugin.close();
    });

    it(`a call that reads its input after an await sees its own, whatever ran meanwhile (${where})`, () => readsOwnInputAfterAwait({ inWorker }));

    it(`a plugin call run inside another one's host call leaves the outer call's input alone (${where})`, async () => {
      const { plugin: inner } = await sandbox("tamper");
      for (let i = 0; i < 2; i++) await inner.call("echo", "warm", Date.now() + 5_000); // synchronous from now on
      const other = JSON.stringify({ hook: "post_llm_call", session_id: "s_inner", secret: "B".repeat(100) });
      const innerOutputs: unknown[] = [];
      const { plugin: outer } = await sandbox("tamper", {
        inWorker,
        functions: { hookbox_log: () => void innerOutputs.push(inner.callNow("echo", other, Date.now() + 5_000)) },
      });
      for (let i = 0; i < 2; i++) await outer.call("echo", "warm", Date.now() + 5_000);
      const own = JSON.stringify({ hook: "post_llm_call", session_id: "s_outer", secret: "A".repeat(100) });
      assert.equal((await outer.call("log_echo", own, Date.now() + 5_000)).output, own);
      assert.equal((await innerOutputs[0])?.constructor, Object, "the inner call ran");
      assert.equal(((await innerOutputs[0]) as { output: string }).output, other);
      await inner.close();
      await outer.close();
    });

    it(`a load past the input's end fails the call as a trap (${where})`, async () => {
      const { plugin } = await sandbox("tamper", { inWorker });
      const e = await callFailure(plugin.call("overread", "0123456789", Date.now() + 5_000));
      assert.equal(e.kind, "trap", e.message);
      assert.equal((await plugin.call("echo", "after", Date.now() + 5_000)).output, "after");
      await plugin.close();
    });
  }
});

// A worker thread serves some host functions itself (no crossing): their fuel is settled with the
// meter every FUEL_SLICE units, so a module that calls only them runs out as it would in-thread.
describe("hostile modules: host calls a worker serves itself", () => {
  for (const inWorker of [false, true]) {
    it(`a loop of them fails as fuel, not at the deadline (${inWorker ? "worker" : "in-thread"})`, async () => {
      // 2 G units: 2 M such calls; the module's own code asks for fuel only every 1 G units (10^8
      // iterations of its loop, seconds), so without the settling it would reach the deadline first.
      const { plugin } = await sandbox("localcalls", { inWorker, limits: { fuel: 2_000_000_000 } });
      for (const fn of ["spin_io", "spin_wasi"]) {
        const e = await callFailure(plugin.call(fn, "", Date.now() + 5_000));
        assert.equal(e.kind, "fuel", `${fn}: ${e.message}`);
      }
      await plugin.close();
    });
  }
});

// What crosses between a worker thread and the server's thread stays bounded: log lines past the
// rate limit never become messages, and the blocks a host call names cross once, shared.
describe("hostile modules: floods across threads", () => {
  for (const inWorker of [false, true]) {
    it(`3.2 M WASI lines in one call: rate limited, the call ends well within its deadline (${inWorker ? "worker" : "in-thread"})`, async () => {
      await assertRateLimited("wasilines", "short", "a", inWorker, 2_000);
    });

    it(`an 8 MiB block named by four arguments of every host call runs out of fuel, not time (${inWorker ? "worker" : "in-thread"})`, async () => {
      const { plugin } = await sandbox("bigargs", { inWorker, limits: { memoryPages: 256 }, functions: { hookbox_kv_cas: () => 0n } });
      const e = await callFailure(plugin.call("go", "", Date.now() + 2_000));
      assert.equal(e.kind, "fuel", e.message);
      await plugin.close();
    });
  }
});

// A worker instance serves these where its memory is, in the worker (worker-thread.ts): the same answers.
describe("hostile modules: block copies", () => {
  for (const inWorker of [false, true]) {
    it(`copies only between the plugin's own memory and a whole block of its own; anything else returns 0 (${inWorker ? "worker" : "in-thread"})`, async () => {
      const { plugin } = await sandbox("blockcopy", { inWorker });
      const refused = await plugin.call("refused", "", Date.now() + 5_000);
      assert.equal(refused.output, undefined, "every refused copy returned 0");
      const copied = await plugin.call("copy", "", Date.now() + 5_000);
      assert.equal(copied.output, "copied in one call; nothing outside the plugin's own memory and block");
      await plugin.close();
    });
  }
});

describe("hostile modules: output in one copy (hookbox_output_write)", () => {
  for (const inWorker of [false, true]) {
    it(`takes only the plugin's own memory within max_output_bytes; a declined write leaves the kernel's output to count (${inWorker ? "worker" : "in-thread"})`, async () => {
      const { plugin } = await sandbox("outputwrite", { inWorker, limits: { maxOutputBytes: 1_024 } });
      assert.equal((await plugin.call("write", "", Date.now() + 5_000)).output, "written from linear memory in one copy");
      assert.equal((await plugin.call("refused", "", Date.now() + 5_000)).output, undefined, "every refused write returned 0");
      assert.equal((await plugin.call("declined_clears", "", Date.now() + 5_000)).output, "second");
      // Each call starts with no output of an earlier one.
      assert.equal((await plugin.call("refused", "", Date.now() + 5_000)).output, undefined);
      await plugin.close();
    });
  }
});

describe("hostile modules: start functions", () => {
  it("what a start function that trapped staged is dropped, not committed by the next instance's first call", async () => {
    let staged = 0;
    const committed: number[] = [];
    let answers = 0;
    const { plugin } = await sandbox("startkv", {
      functions: { hookbox_kv_set: () => void staged++, hookbox_kv_get: () => BigInt(answers++) },
      end: (ok) => {
        if (ok) committed.push(staged);
        staged = 0;
      },
    });
    await assert.rejects(plugin.call("noop", "", Date.now() + 5_000), /instantiation failed/);
    await plugin.call("noop", "", Date.now() + 5_000);
    assert.deepEqual(committed, [1]); // the second start function's write only
    await plugin.close();
  });

  // The host's functions learn the deadline from begin(): an http: request a start function made
  // was never aborted (a server that does not answer kept one connection open per load).
  for (const inWorker of [false, true]) {
    it(`a start function's host calls run under the load's deadline (${inWorker ? "worker" : "in-thread"})`, async () => {
      let deadline: number | undefined;
      const seen: Array<number | undefined> = [];
      const { plugin } = await sandbox("starthttp", { inWorker, functions: { hookbox_http: () => (seen.push(deadline), 0n) } });
      const host = (plugin as unknown as { opts: { host: HostBinding } }).opts.host;
      host.begin = (d) => void (deadline = d);
      const t0 = Date.now();
      await plugin.warm();
      assert.equal(seen.length, 1);
      assert.ok(seen[0]! >= t0 && seen[0]! <= Date.now() + LIMITS.timeoutMs, `the start function's host call saw deadline ${seen[0]}`);
      await plugin.close();
    });
  }
});

// In a worker the worker thread serves WASI over the module's memory, with the same limits.
describe("hostile modules: WASI", () => {
  for (const inWorker of [false, true]) {
    it(`one fd_write takes at most 64 KiB (a short write, as a pipe makes) and at most 1024 iovecs (${inWorker ? "worker" : "in-thread"})`, async () => {
      // 120 iovecs of 4 MiB each were decoded whole: 10 s on the thread and 2 GB for one host call.
      const { plugin, logs } = await sandbox("wasiwrite", { inWorker, limits: { memoryPages: 64 } });
      assert.equal((await plugin.call("flood", "", Date.now() + 5_000)).output, undefined);
      assert.ok(logs.length > 0, "what it wrote reached its log");
      const e = await callFailure(plugin.call("too_many", "", Date.now() + 5_000));
      assert.match(e.message, /returned 128/); // 100 + EINVAL
      await plugin.close();
    });
  }
});

// Async host functions (http:) run where the runtime can suspend a WASM call (CAN_SUSPEND: Deno)
// in-thread, else in a worker: either way a slow answer is not plugin work and a stuck one ends at
// the deadline.
describe(`hostile modules: async host functions (${CAN_SUSPEND ? "in-thread, suspended" : "worker"})`, () => {
  it("a call waiting twice 150 ms on an async host function keeps its in-thread slice (no move to a worker)", async () => {
    const slow: HostFunction = async () => new Promise((r) => setTimeout(() => r(0n), 150));
    const { plugin, logs } = await sandbox("hang", { functions: { hookbox_session_messages: slow } });
    const r = await plugin.call("wait_twice", "", Date.now() + 5_000);
    assert.equal(r.output, undefined);
    assert.ok(!logs.some((l) => /in-thread slice/.test(l)), logs.join(" / "));
    await plugin.close();
  });

  it("calls that wait on an async host function each get their own answer, as output or as the plugin's error", async () => {
    let n = 0;
    const answer: HostFunction = async (ctx) => ctx.store(`answer ${++n}`);
    const { plugin, ends } = await sandbox("hang", { functions: { hookbox_session_messages: answer } });
    // The first call of an instance goes through the SDK's call(), the later ones (in-thread) run
    // the export directly: both paths must give the same results.
    for (let i = 1; i <= 3; i++) assert.equal((await plugin.call("echo", "", Date.now() + 5_000)).output, `answer ${i}`);
    const e = await callFailure(plugin.call("fail_after", "", Date.now() + 5_000));
    assert.equal(e.kind, "trap");
    assert.match(e.message, /answer 4/);
    assert.equal((await plugin.call("echo", "", Date.now() + 5_000)).output, "answer 5");
    assert.deepEqual(ends, [true, true, true, false, true]);
    await plugin.close();
  });

  it("a call that outgrows its slice after an async host call is not run again (the call's request went out once)", async () => {
    let calls = 0;
    const answer: HostFunction = async (ctx) => (calls++, ctx.store("ok"));
    const { plugin } = await sandbox("hang", { limits: { fuel: 2 ** 40 }, functions: { hookbox_session_messages: answer } });
    const e = await callFailure(plugin.call("wait_then_spin", "", Date.now() + 1_500));
    assert.equal(e.kind, "timeout");
    assert.equal(calls, 1);
    await plugin.close();
  });

  it("a call stuck in an async host function fails as timeout by deadline + grace; the next call runs", async () => {
    const late: HostFunction = async () => new Promise((r) => setTimeout(() => r(0n), 2_000));
    const { plugin, ends } = await sandbox("hang", { functions: { hookbox_session_messages: late } });
    await plugin.warm();
    const t0 = performance.now();
    const e = await callFailure(plugin.call("wait", "", Date.now() + 300));
    assert.equal(e.kind, "timeout");
    assert.ok(performance.now() - t0 < 300 + WORKER_GRACE_MS + 1_000);
    assert.equal((await plugin.call("noop", "", Date.now() + 10_000)).output, undefined);
    assert.deepEqual(ends, [false, true]);
    await plugin.close();
  });
});

describe("hostile modules: hang (worker)", () => {
  // The worker's kernel is reset by each call (the SDK's in-thread call, run in the worker): blocks of
  // earlier calls do not pile up.
  it("back-to-back worker calls of 300 KB each all succeed (10 calls)", async () => {
    const { plugin, ends } = await sandbox("flood", { inWorker: true, limits: { memoryPages: 8, maxOutputBytes: 1_048_576 } });
    for (let i = 0; i < 10; i++) assert.equal((await plugin.call("pre_llm_call", "", Date.now() + 5_000)).output?.length, 300_000, `call ${i + 1}`);
    assert.deepEqual(ends, Array(10).fill(true));
    await plugin.close();
  });

  it("a worker call stuck in a host function fails as timeout by deadline + grace; the lock is released", async () => {
    // Answers long after the deadline (one that never settles would keep Extism's host-call timer alive).
    const never: HostFunction = async () => new Promise((r) => setTimeout(() => r(0n), 2_000));
    const { plugin, ends } = await sandbox("hang", { inWorker: true, functions: { hookbox_session_messages: never } });
    await plugin.warm();
    const t0 = performance.now();
    const e = await callFailure(plugin.call("wait", "", Date.now() + 300));
    const ms = performance.now() - t0;
    assert.equal(e.kind, "timeout");
    assert.ok(ms < 300 + WORKER_GRACE_MS + 1_000, `settled after ${ms} ms`);
    // The instance lock is free and a fresh worker serves the next call.
    const ok = await plugin.call("noop", "", Date.now() + 10_000);
    assert.equal(ok.output, undefined);
    assert.deepEqual(ends, [false, true]);
    await plugin.close();
  });

  // A server shutting down closes its plugins under their running calls: the host's doing, not a
  // trap of the plugin's (an operator probe saw one logged as trap, and quarantined).
  it("a worker call cut off by closing its plugin fails as unavailable, not trap", async () => {
    const { plugin } = await sandbox("hang", { inWorker: true, limits: { fuel: 2 ** 40 }, functions: { hookbox_session_messages: () => 0n } });
    await plugin.warm();
    const call = callFailure(plugin.call("spin", "", Date.now() + 10_000));
    await new Promise((r) => setTimeout(r, 100));
    await plugin.close();
    const e = await call;
    assert.equal(e.kind, "unavailable", e.message);
    assert.match(e.message, /closed while the call ran/);
  });

  it("a spinning worker call is stopped at its deadline and the event loop stays free", async () => {
    const { plugin } = await sandbox("hang", { inWorker: true, limits: { fuel: 2 ** 40 }, functions: { hookbox_session_messages: () => 0n } });
    await plugin.warm();
    const call = callFailure(plugin.call("spin", "", Date.now() + 500));
    const stall = await longestStall(call);
    assert.equal((await call).kind, "timeout");
    console.log(`worker spin: longest event-loop stall ${stall.toFixed(1)} ms`);
    assert.ok(stall < 250, `event loop stalled ${stall} ms`);
    await plugin.close();
  });
});

// After a call that failed and came back, the next instance is built in the same worker thread
// (starting one costs 50-300 ms): it must start clean and read only its own call's input.
describe("a worker instance rebuilt after a failed call", () => {
  it("each call after a denial reads its own input (httpsnoop, a plugins-wasm/lib plugin)", async () => {
    const wasm = readFileSync(fileURLToPath(new URL("../plugins-wasm/hostile/httpsnoop/plugin.wasm", import.meta.url)));
    const module = await compileInstrumented(new Uint8Array(wasm), { memoryPages: 64 });
    const denyNamingUrl: HostFunction = async (ctx: CallContext, req: bigint) => {
      throw new PluginCallError("denied", `refused ${readText(ctx, req, "request", 10_000)}`);
    };
    const host: HostBinding = {
      functions: { ...Object.fromEntries(HOST_FUNCTION_NAMES.map((n) => [n, () => 0n])), hookbox_http: denyNamingUrl },
      asyncFunctions: new Set(["hookbox_http"]),
      begin() {},
      end() {},
    };
    const plugin = new WasmPlugin({ name: "httpsnoop", module, limits: LIMITS, host, inWorker: true });
    for (const url of ["http://a.test/", "http://b.test/", "http://c.test/"]) {
      const e = await callFailure(plugin.call("command_httpsnoop", JSON.stringify({ command: "httpsnoop", raw_args: url, args: [url] }), Date.now() + 5_000));
      assert.equal(e.kind, "denied");
      assert.match(e.message, new RegExp(`refused .*"${url.replace(/[./]/g, "\\$&")}"`));
    }
    await plugin.close();
  });
});

// Each host call's answer is its own: a worker takes the answer to the request it sent, even when
// the server's wake-up reaches it before the answer's message does, and never an answer left over
// (an outside probe saw a late answer handed to the next request, and to every later call).
describe("hostile modules: answers in step with their requests", () => {
  const echo = (_ctx: CallContext, _scope: bigint, i: bigint) => i + 1n;
  const faults: Record<string, (reply: (a: unknown) => void) => (this: any, answer: unknown) => void> = {
    none: (reply) =>
      function (answer) {
        reply.call(this, answer);
      },
    "the wake-up before the answer's message": () =>
      function (answer) {
        Atomics.store(this.flag, 0, 1);
        Atomics.notify(this.flag, 0);
        setTimeout(() => this.port.postMessage(answer), 1);
      },
    "a stale copy of each answer left on the port": (reply) =>
      function (answer) {
        reply.call(this, answer);
        this.port.postMessage(answer);
      },
  };
  it("a worker woken with no answer at all gives up after a second, as a failed call (no endless spin)", async () => {
    const proto = WorkerInstance.prototype as unknown as { reply(a: unknown): void };
    const reply = proto.reply;
    proto.reply = function (this: any) {
      Atomics.store(this.flag, 0, 1);
      Atomics.notify(this.flag, 0);
    };
    try {
      const { plugin } = await sandbox("echoes", { inWorker: true, functions: { hookbox_kv_get: echo } });
      await plugin.warm();
      const e = await callFailure(plugin.call("echo_200", "", Date.now() + 10_000));
      assert.match(e.message, /no answer from the host within 1000 ms/);
      await plugin.close();
    } finally {
      proto.reply = reply;
    }
  });

  it("an answer whose message comes late after a host function that ran over a second is still taken", async () => {
    const proto = WorkerInstance.prototype as unknown as { reply(a: unknown): void };
    const reply = proto.reply;
    proto.reply = faults["the wake-up before the answer's message"]!(reply);
    try {
      // The first call's host function takes 1.2 s; the bound on a late message counts from the wake-up.
      const slowFirst = async (_ctx: CallContext, _scope: bigint, i: bigint) => {
        if (i === 0n) await new Promise((r) => setTimeout(r, 1_200));
        return i + 1n;
      };
      const { plugin } = await sandbox("echoes", { inWorker: true, functions: { hookbox_kv_get: slowFirst } });
      assert.equal((await plugin.call("echo_200", "", Date.now() + 10_000)).output, "o");
      await plugin.close();
    } finally {
      proto.reply = reply;
    }
  });

  for (const [fault, patch] of Object.entries(faults)) {
    it(`200 host calls a call, each answered for itself, call after call; in a worker with ${fault}`, async () => {
      const proto = WorkerInstance.prototype as unknown as { reply(a: unknown): void };
      const reply = proto.reply;
      proto.reply = patch(reply);
      try {
        const { plugin } = await sandbox("echoes", { inWorker: true, functions: { hookbox_kv_get: echo } });
        for (let call = 0; call < 3; call++) assert.equal((await plugin.call("echo_200", "", Date.now() + 10_000)).output, "o", `call ${call}`);
        await plugin.close();
      } finally {
        proto.reply = reply;
      }
    });
  }
});

// Where the runtime has no JSPI (Node 20), a plugin with async host functions (http:) runs in-thread
// from a rewindable module (sandbox/rewind.ts). Forced here, so both runtimes test it.
describe("hostile modules: suspended by rewinding (a runtime without JSPI)", () => {
  // The test's hookbox_http answers a moment later, naming the request it got.
  const http = async (ctx: CallContext, req: bigint) => {
    await new Promise((r) => setTimeout(r, 5));
    return ctx.store(req === 0n ? "first" : `second after ${ctx.read(req)?.text()}`);
  };

  // Found by an outside probe: one function of 20,000 locals and 20,000 call sites made Binaryen
  // take 3.7 GiB of the server's memory for 20 s, again at every reload.
  it("a module too heavy to make rewindable is refused before Binaryen sees it, and the refusal is remembered", async () => {
    const body = new Writer().u32(1).u32(2_000).byte(0x7f); // 2,000 i32 locals
    for (let i = 0; i < 600; i++) body.byte(Op.Call).u32(0);
    body.byte(Op.End);
    const heavy = writeModule([
      { id: 1, body: new Writer().u32(1).byte(0x60).u32(0).u32(0).toBytes() },
      { id: 3, body: new Writer().u32(1).u32(0).toBytes() },
      { id: 7, body: new Writer().u32(1).name("run").byte(0).u32(0).toBytes() },
      { id: 10, body: new Writer().u32(1).sized(body).toBytes() },
    ]);
    await compileInstrumented(heavy, { memoryPages: 4 }); // as a plain plugin it loads
    for (let round = 0; round < 2; round++) {
      const t0 = performance.now();
      await assert.rejects(compileInstrumented(heavy, { memoryPages: 4 }, [`${HOST_MODULE}.hookbox_http`]), /too heavy to make rewindable \(locals x call sites \+ instructions 1205413, at most 1000000\)/);
      assert.ok(performance.now() - t0 < 2_000, `round ${round}: refused in ${performance.now() - t0} ms`);
    }
  });

  // Found by an outside probe: 1.4 M nested blocks (no call, no local) took Binaryen 470 MB more.
  it("a module of a million instructions is refused before Binaryen sees it, whatever its locals and calls", async () => {
    const nested = nestedBlocksModule(500_001); // block and end each: 1,000,004 instructions, and the entry meter
    await assert.rejects(compileInstrumented(nested, { memoryPages: 4 }, [`${HOST_MODULE}.hookbox_http`]), /too heavy to make rewindable \(locals x call sites \+ instructions 1000016, at most 1000000\)/);
  });

  it("a call suspended twice resumes each time with its locals and its memory as it left them", async () => {
    const { plugin } = await sandbox("rewind", { rewind: true, functions: { hookbox_http: http } });
    for (let i = 0; i < 3; i++) assert.equal((await plugin.call("keep", "", Date.now() + 5_000)).output, "second after first");
    await plugin.close();
  });

  it("while one call is suspended, other plugins run theirs; it then reads its own input", () => readsOwnInputAfterAwait({ rewind: true }));

  it("a stack too deep to unwind fails its call as a trap, and the next calls run", async () => {
    const { plugin } = await sandbox("rewind", { rewind: true, functions: { hookbox_http: http } });
    const e = await callFailure(plugin.call("deep", "", Date.now() + 5_000));
    assert.equal(e.kind, "trap", e.message);
    assert.match(e.message, /too deep to suspend/);
    assert.equal((await plugin.call("shallow", "", Date.now() + 5_000)).output, undefined);
    assert.equal((await plugin.call("keep", "", Date.now() + 5_000)).output, "second after first");
    await plugin.close();
  });

  it("a host function that never answers times the call out; the next call runs on a new instance", async () => {
    let hang = true;
    const { plugin } = await sandbox("rewind", { rewind: true, functions: { hookbox_http: async (ctx: CallContext, req: bigint) => (hang ? await new Promise<never>(() => {}) : await http(ctx, req)) } });
    const e = await callFailure(plugin.call("keep", "", Date.now() + 300));
    assert.equal(e.kind, "timeout", e.message);
    hang = false;
    assert.equal((await plugin.call("keep", "", Date.now() + 5_000)).output, "second after first");
    await plugin.close();
  });

  // Found by an outside probe: the host call began before the check for room, and its promise,
  // which nothing then awaited, rejected later: an unhandled rejection ended the process.
  it("a module with no room to suspend in fails its call, and no host call of it is left behind", async () => {
    let started = 0;
    const rejecting = async () => {
      started++;
      throw new PluginCallError("trap", "hookbox_http: request is not JSON");
    };
    for (const [name, fn, why] of [
      ["rewindroom", "nomemory", /no memory to suspend the call in/],
      ["rewindname", "misnamed", /exports no memory named "memory"/],
    ] as const) {
      const { plugin } = await sandbox(name, { rewind: true, functions: { hookbox_http: rejecting } });
      for (let i = 0; i < 2; i++) {
        const e = await callFailure(plugin.call(fn, "", Date.now() + 5_000));
        assert.match(e.message, why);
      }
      await plugin.close();
    }
    await new Promise((r) => setTimeout(r, 50)); // an unhandled rejection would fail the test run here
    assert.equal(started, 0, "the host function never ran");
  });

  it("a plugin runs in a worker (or suspended by JSPI) until its rewindable module arrives, then in-thread", async () => {
    const { plugin } = await sandbox("rewind", { functions: { hookbox_http: http } });
    assert.equal((await plugin.call("keep", "", Date.now() + 5_000)).output, "second after first");
    assert.equal(plugin.path, CAN_SUSPEND ? "in-thread, suspended" : "worker");
    plugin.useRewindable(await compileInstrumented(hostileModule("rewind"), { memoryPages: LIMITS.memoryPages }, [`${HOST_MODULE}.hookbox_http`]));
    assert.equal((await plugin.call("keep", "", Date.now() + 5_000)).output, "second after first");
    assert.equal(plugin.path, "in-thread, rewinding");
    await plugin.close();
  });

  it("a module whose start function calls an async host function starts in a worker instead", async () => {
    const logs: string[] = [];
    const { plugin } = await sandbox("starthttp", { rewind: true, functions: { hookbox_http: async () => 0n, hookbox_log: () => undefined } });
    const host = (plugin as unknown as { opts: { host: HostBinding } }).opts.host;
    host.log = (_level, _source, message) => void logs.push(message);
    await plugin.warm();
    assert.equal(plugin.path, "worker");
    assert.match(logs.join("\n"), /rewindable module could not start \(instantiation failed: .*cannot be called from a start function\)/);
    assert.equal((await plugin.call("noop", "", Date.now() + 5_000)).output, undefined);
    await plugin.close();
  });
});
