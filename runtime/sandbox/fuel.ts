// Host side of the fuel metering written into modules by instrument.ts. One meter per plugin
// instance; calls into an instance are serialized, so per-call state lives here.
import { PluginCallError } from "../../hooks/failures.ts";

/** Units granted per refill: large enough that the host call (and its clock check) is rare. */
export const FUEL_SLICE = 4_000_000;

export class FuelMeter {
  private deadline = Infinity;
  private granted = 0;
  private pool = 0;
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

  /** Arms the meter for one exported call that must finish by `deadline` (epoch ms). */
  start(deadline: number): void {
    this.deadline = deadline;
    this.active = true;
    this.used = 0;
    this.memoryRefused = false;
    this.returnCode = 0;
  }

  stop(): void {
    this.active = false;
  }

  /** The import object for the "hookbox:fuel" module (Extism passes its call context first). */
  readonly functions = {
    begin: (): number => {
      if (!this.active) this.start(Infinity); // an export run outside call(): still metered
      this.granted = Math.min(FUEL_SLICE, this.budget);
      this.pool = this.budget - this.granted;
      return this.granted;
    },
    refill: (_ctx: unknown, counter: number): number => {
      while (counter < 0 && this.pool > 0) {
        const slice = Math.min(FUEL_SLICE, this.pool);
        this.pool -= slice;
        this.granted += slice;
        counter += slice;
      }
      if (counter < 0) {
        this.used = this.budget;
        throw new PluginCallError("fuel", `ran out of fuel (budget ${this.budget} units)`);
      }
      if (this.now() > this.deadline) {
        throw new PluginCallError("timeout", `ran past its deadline after ${this.granted - counter} fuel units`);
      }
      return counter;
    },
    end: (_ctx: unknown, left: number): void => {
      this.used = this.granted - left;
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
