// Host side of the fuel metering written into modules by instrument.ts. One meter per plugin
// instance; calls into an instance are serialized, so per-call state lives here.
//
// The meter is armed (start) for every stretch of plugin code: an exported call, and the
// instantiation that runs a start function. Each refill and each host call checks the clock, so a
// call is stopped within one slice of its deadline whatever it does.
import { PluginCallError } from "../../hooks/failures.ts";
import { SliceExpired } from "./inline-slice.ts";

/**
 * Units granted per refill, i.e. how much code runs between two clock checks: about 1 ms of plain
 * instructions (a bulk memory operation is charged 1 unit per 16 bytes, so it is bounded the same).
 */
export const FUEL_SLICE = 1_000_000;

/**
 * Units per refill in a worker. There a refill is a round trip to the server's thread
 * (worker-instance.ts), and the server's thread is not held by the call: a worker's module refills
 * rarely; its deadline timer (wasm-plugin.ts) and the clock check of every host call bound its time.
 */
export const WORKER_GRANT = 2 ** 30;

/** Fuel a host call costs on top of 1 unit per 16 bytes of the blocks it is handed or makes. */
export const HOST_CALL_FUEL = 1_000;
/**
 * The sandbox's own cheap host calls (the input, the output, block copies: memory work charged by
 * its bytes) read the clock (deadline, slice) every CLOCK_EVERY_CALLS, or once they were charged
 * more than that many plain ones since the last read. The call's start read it, every refill reads
 * it, and so does every call of a host API function (it may read the database or start a request).
 */
const CLOCK_EVERY_CALLS = 8;
const CLOCK_AT_UNITS = CLOCK_EVERY_CALLS * HOST_CALL_FUEL;

/** The address of Extism block 1 (block 0 is the kernel's own): smaller u64 arguments are not blocks. */
export const FIRST_BLOCK = 1n << 48n;

/**
 * What a host call costs before its answer: HOST_CALL_FUEL plus 1 unit per 16 bytes of the blocks
 * its u64 arguments name (pointers and lengths below FIRST_BLOCK name none). One formula for the
 * functions the server's thread serves and those a worker thread serves itself.
 */
export function hostCallCost(ctx: { length(address: bigint): bigint }, args: readonly unknown[]): number {
  let bytes = 0;
  for (const a of args) {
    if (typeof a === "bigint") {
      if (a >= FIRST_BLOCK) bytes += Number(ctx.length(a));
    } else if (typeof a === "number" && a >= FIRST_BLOCK_NUMBER && Number.isInteger(a)) {
      // A module may import a host function with f64 parameters (the SDK takes a number as an
      // address too): its blocks cost the same (they went free; an outside probe).
      bytes += Number(ctx.length(BigInt(a)));
    }
  }
  return HOST_CALL_FUEL + Math.floor(bytes / 16);
}
const FIRST_BLOCK_NUMBER = Number(FIRST_BLOCK);

/** What end() hands the module to keep for its next call: a whole grant of `grantSize`, within the budget. */
export const keptGrant = (grantSize: number, budget: number): number => Math.min(grantSize, budget);

/**
 * Default cap on one kernel block, whatever the memory allowance: a block handed to a host function
 * from a worker crosses to the server's thread whole, copied there. Far above what a plugin hands
 * the host (a KV value: 256 KiB; a sweep's ids: 4 MiB; an output: max_output_bytes, for which the
 * loader raises it).
 */
export const KERNEL_BLOCK_BYTES = 16 * 1024 * 1024;

/**
 * Most blocks one call may make, the module's allocs and host functions' answers together. The SDK
 * keeps every block of a call (a freed one too) as an object of about 0.5 KB on the host: 1,000,000
 * empty allocs (fuel 10^9) held ~480 MB. It numbers them in the top 16 bits of a signed i64 address,
 * so past 32,767 an address turns negative (a plugin read a wrong answer): checked on the address
 * itself (alloc shim, FuelMeter.chargeAnswer, a worker's answers).
 */
export const MAX_CALL_BLOCKS = 32_000;
const MAX_CALL_BLOCKS_N = BigInt(MAX_CALL_BLOCKS);
/** Whether a block's address (the SDK's number in its top 16 bits) is past MAX_CALL_BLOCKS. */
export const pastCallBlocks = (address: bigint): boolean => address >> 48n >= MAX_CALL_BLOCKS_N;
const BLOCKS_TEXT = `more than ${MAX_CALL_BLOCKS.toLocaleString("en-US")} blocks`;

export class FuelMeter {
  private deadline = Infinity;
  /** An in-thread stretch's end (inline-slice.ts): past it the call moves to a worker. */
  private sliceEnd = Infinity;
  /** Units per refill for the current stretch (FUEL_SLICE in-thread, WORKER_GRANT in a worker). */
  private grantSize = FUEL_SLICE;
  /**
   * Fuel not yet handed to the module; host calls are charged here, so it may go negative (a debt
   * the module's counter pays at its next refill). Used = budget - pool - what the counter holds.
   */
  private pool = 0;
  /** The last grant: the module's counter never holds more, so a debt beyond it is out of fuel. */
  private lastGrant = 0;
  /**
   * What the last end() granted the instance's next call (the module keeps it and starts from it
   * without a begin()); 0 when nothing is kept. forgetGrant() when the instance goes.
   */
  private kept = 0;
  private active = false;
  /** Fuel the last call used (its whole budget when it ran out). */
  used = 0;
  /** Set when the module asked for memory beyond its cap during the current call: linear or host blocks. */
  memoryRefused: false | "grow" | "kernel" | "answers" = false;
  /** Bytes of the blocks host functions made for their answers during the current call. */
  private answerBytes = 0;
  /** What the last export returned when it returns an i32 (Extism: 0 success, anything else failure). */
  returnCode = 0;

  constructor(
    readonly budget: number,
    private readonly memoryPages: number,
    private readonly now: () => number = Date.now,
    /** The call's time limit, for the message of a call past it. */
    private readonly timeoutMs?: number,
  ) {}

  /**
   * Arms the meter for one stretch of plugin code that must finish by `deadline` (epoch ms): an
   * in-thread stretch also by `sliceEnd`; a worker's gets WORKER_GRANT per refill.
   */
  start(deadline: number, where: { sliceEnd: number } | "worker" = { sliceEnd: Infinity }): void {
    this.deadline = deadline;
    this.sliceEnd = where === "worker" ? Infinity : where.sliceEnd;
    this.grantSize = where === "worker" ? WORKER_GRANT : FUEL_SLICE;
    this.active = true;
    this.suspendedMs = 0;
    this.used = 0;
    // A grant the module kept from its last call's end() is this call's first (begin() re-grants).
    this.pool = this.budget - this.kept;
    this.lastGrant = this.kept;
    this.kept = 0;
    this.memoryRefused = false;
    this.answerBytes = 0;
    this.returnCode = 0;
    this.uncheckedCalls = 0;
    this.uncheckedUnits = 0;
  }

  stop(): void {
    this.active = false;
  }

  /** The instance is gone (or new): its next call starts with begin(), nothing is kept. */
  forgetGrant(): void {
    this.kept = 0;
  }

  /** How long the current stretch has spent suspended on async host functions, ms. */
  suspendedMs = 0;

  /** Moves the slice's end by `ms` the call spent suspended (the thread was free meanwhile). */
  extendSlice(ms: number): void {
    this.sliceEnd += ms;
    this.suspendedMs += ms;
  }

  /** Host calls charged since the clock was last read, and their units (see charge). */
  private uncheckedCalls = 0;
  private uncheckedUnits = 0;

  /**
   * Charges a host call (see wasm-plugin.ts: every host function the module imports is wrapped):
   * host work costs fuel like the module's own. A `checked` call is a clock check; cheap ones are
   * every CLOCK_EVERY_CALLS-th, or once they were charged more than CLOCK_AT_UNITS since the last:
   * reading the input or writing the output is not worth a clock read each (45-100 ns, a tenth of a
   * small plugin's call), and a copy's price grows with its bytes.
   */
  charge(units: number, checked = false): void {
    if (!this.active) return;
    this.pool -= units;
    if (this.pool < -this.lastGrant) this.outOfFuel();
    this.uncheckedUnits += units;
    if (checked || ++this.uncheckedCalls >= CLOCK_EVERY_CALLS || this.uncheckedUnits > CLOCK_AT_UNITS) this.checkTime();
  }

  /** Checks the deadline and the slice now (a host function's long work, between its steps). */
  checkTime(): void {
    if (!this.active) return;
    this.uncheckedCalls = 0;
    this.uncheckedUnits = 0;
    this.checkClock();
  }

  /**
   * Charges a block a host function made for its answer (a KV value, a key list, messages, a fetched
   * body): 1 unit per 16 bytes, and within one call such blocks may hold no more than the module's
   * memory allowance, like the blocks the module allocates itself (instrument.ts alloc_shim).
   */
  chargeAnswer(bytes: number, address?: bigint): void {
    if (!this.active) return;
    this.answerBytes += bytes;
    // The SDK numbers the call's blocks in the address's top 16 bits (instrument.ts alloc_shim); a
    // worker's answers get their addresses there, and are checked there (worker-thread.ts).
    if (this.answerBytes > this.memoryPages * 65_536 || (address !== undefined && pastCallBlocks(address))) {
      this.memoryRefused = "answers";
      throw this.memoryError();
    }
    this.charge(Math.floor(bytes / 16));
  }

  private outOfFuel(): never {
    this.used = this.budget;
    // Says which setting to change, as a plugin author reads it in the call's failure.
    throw new PluginCallError("fuel", `ran out of fuel (budget ${this.budget} units: limits.fuel of its manifest, or the operator's plugins.limits)`);
  }

  /**
   * Fuel handed out to the running call so far: what it used, to within the grant its counter still
   * holds. Host calls charged past the last grant (a debt, pool < 0) are not more than the budget.
   */
  handedOut(): number {
    return Math.min(this.budget - this.pool, this.budget);
  }

  private checkClock(): void {
    const now = this.now();
    if (now > this.deadline) {
      // A call that timed out counts what it was handed (its stats said 0: an outside probe).
      this.used = this.handedOut();
      const limit = this.timeoutMs === undefined ? "its time limit" : `its time limit of ${this.timeoutMs} ms`;
      throw new PluginCallError("timeout", `ran past ${limit} (limits.timeout_seconds; ${this.used} of ${this.budget} fuel units handed out)`);
    }
    if (now > this.sliceEnd) throw new SliceExpired();
  }

  private grant(): number {
    const slice = Math.min(this.grantSize, this.pool);
    this.pool -= slice;
    this.lastGrant = slice;
    return slice;
  }

  /** The import object for the "hookbox:fuel" module (Extism passes its call context first). */
  readonly functions = {
    begin: (): number => {
      if (!this.active) this.start(Infinity); // an export run outside call(): still metered
      // What a start function left of its slice is not carried into the call.
      this.pool = this.budget;
      return this.grant();
    },
    refill: (_ctx: unknown, counter: number): number => {
      if (!this.active) this.outOfFuel(); // code running outside any armed stretch gets nothing
      if (this.pool < 0) {
        counter += this.pool; // host calls' debt
        this.pool = 0;
      }
      while (counter < 0 && this.pool > 0) counter += this.grant();
      if (counter < 0) this.outOfFuel();
      this.checkClock();
      return counter;
    },
    /** The call's end: what it used; answers the grant the module keeps for its next call. */
    end: (_ctx: unknown, left: number): number => {
      // The counter holds at most the last grant: more is a module that wrote it (never a valid one).
      left = Math.min(left, this.lastGrant);
      if (this.pool + left < 0) this.outOfFuel();
      this.used = this.budget - this.pool - left;
      // Code run outside an armed stretch keeps nothing: its next call asks begin().
      this.kept = this.active ? keptGrant(this.grantSize, this.budget) : 0;
      return this.kept;
    },
    /** end() for an export that returns Extism's status code (0 success). */
    finish: (ctx: unknown, code: number, left: number): number => {
      this.returnCode = code;
      return this.functions.end(ctx, left);
    },
    oom: (_ctx: unknown, _delta: number): void => {
      this.memoryRefused = "grow";
    },
    kernel_oom: (): void => {
      this.memoryRefused = "kernel";
    },
  };

  memoryError(): PluginCallError {
    const limit = `${this.memoryPages} pages (${this.memoryPages * 64} KiB)`;
    if (this.memoryRefused === "kernel") {
      return new PluginCallError("memory", `host memory (kernel alloc) beyond the limit of ${limit} or ${BLOCKS_TEXT} in one call, or one block beyond ${KERNEL_BLOCK_BYTES / 1_048_576} MiB (max_output_bytes when larger)`);
    }
    if (this.memoryRefused === "answers") return new PluginCallError("memory", `host memory (host function answers) beyond the limit of ${limit} or ${BLOCKS_TEXT} in one call`);
    return new PluginCallError("memory", `memory limit of ${limit} reached`);
  }
}
