// Host side of the fuel metering written into modules by instrument.ts. One meter per plugin
// instance; calls into an instance are serialized, so per-call state lives here.
//
// The meter is armed (start) for every stretch of plugin code: an exported call, and the
// instantiation that runs a start function. Each refill and each host call checks the clock, so a
// call is stopped within one slice of its deadline whatever it does.
import { PluginCallError } from "../../hooks/failures.ts";

/**
 * Units granted per refill, i.e. how much code runs between two clock checks: about 1 ms of plain
 * instructions (a bulk memory operation is charged 1 unit per 16 bytes, so it is bounded the same).
 */
export const FUEL_SLICE = 1_000_000;

export class FuelMeter {
  private deadline = Infinity;
  /**
   * Fuel not yet handed to the module; host calls are charged here, so it may go negative (a debt
   * the module's counter pays at its next refill). Used = budget - pool - what the counter holds.
   */
  private pool = 0;
  /** The last grant: the module's counter never holds more, so a debt beyond it is out of fuel. */
  private lastGrant = 0;
  private active = false;
  /** Fuel the last call used (its whole budget when it ran out). */
  used = 0;
  /** Set when the module asked for memory beyond its cap during the current call. */
  memoryRefused = false;
  /** What the last export returned when it returns an i32 (Extism: 0 success, anything else failure). */
  returnCode = 0;

  constructor(
    readonly budget: number,
    private readonly memoryPages: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Arms the meter for one stretch of plugin code that must finish by `deadline` (epoch ms). */
  start(deadline: number): void {
    this.deadline = deadline;
    this.active = true;
    this.used = 0;
    this.pool = this.budget;
    this.lastGrant = 0;
    this.memoryRefused = false;
    this.returnCode = 0;
  }

  stop(): void {
    this.active = false;
  }

  /**
   * Charges a host call (see wasm-plugin.ts: every host function the module imports is wrapped):
   * host work costs fuel like the module's own, and the call is a clock check.
   */
  charge(units: number): void {
    if (!this.active) return;
    this.pool -= units;
    if (this.pool < -this.lastGrant) this.outOfFuel();
    this.checkClock();
  }

  private outOfFuel(): never {
    this.used = this.budget;
    throw new PluginCallError("fuel", `ran out of fuel (budget ${this.budget} units)`);
  }

  private checkClock(): void {
    if (this.now() > this.deadline) {
      throw new PluginCallError("timeout", `ran past its deadline after about ${this.budget - this.pool} fuel units`);
    }
  }

  private grant(): number {
    const slice = Math.min(FUEL_SLICE, this.pool);
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
    end: (_ctx: unknown, left: number): void => {
      if (this.pool + left < 0) this.outOfFuel();
      this.used = this.budget - this.pool - left;
    },
    oom: (_ctx: unknown, _delta: number): void => {
      this.memoryRefused = true;
    },
    ret: (_ctx: unknown, code: number): number => {
      this.returnCode = code;
      return code;
    },
  };

  memoryError(): PluginCallError {
    return new PluginCallError("memory", `memory limit of ${this.memoryPages} pages (${this.memoryPages * 64} KiB) reached`);
  }
}
