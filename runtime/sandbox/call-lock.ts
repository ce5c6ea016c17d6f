// Calls into one instance never overlap (Extism instances are not reentrant): the lock of one
// sandbox, handed first come, first served.
import { PluginCallError } from "../../hooks/failures.ts";

/** setTimeout's longest delay: a longer one (a far deadline) would fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export class CallLock {
  private held = false;
  private readonly waiting: Array<() => void> = [];

  /** Takes the lock when it is free (true); false: wait() for it. */
  take(): boolean {
    if (this.held) return false;
    this.held = true;
    return true;
  }

  /**
   * Waits for the lock. A caller still waiting at its deadline leaves the queue at once as
   * `unavailable`: the plugin never ran (its earlier calls, or the host's KV commits for them, held
   * it), so the wait neither delays its caller past the deadline nor counts towards a quarantine or
   * cool-off.
   */
  wait(deadline: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(wake);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(new PluginCallError("unavailable", `waited past its deadline for its busy instance (${this.waiting.length + 1} calls were queued)`));
      }, Math.min(Math.max(0, deadline - Date.now()), MAX_TIMER_MS));
      this.waiting.push(wake);
    });
  }

  /** Passes the lock straight to the next caller waiting (it stays held), or frees it. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }

  /** Held by a call (the instance is busy). */
  get busy(): boolean {
    return this.held;
  }
}
