// Per-plugin log rate limit: a token bucket shared by every way a plugin can make the host write a
// line (hookbox_log, WASI stdout/stderr, Extism's kernel log_* functions). Lines beyond the budget
// are dropped and counted; the sandbox reports the count once per call, so a flood costs the host
// one line, not 444k.

/** Lines a plugin may log in a burst, and lines per second after that. */
export const LOG_BURST = 200;
export const LOG_LINES_PER_SECOND = 50;

export class LogBudget {
  private tokens = LOG_BURST;
  private last: number;
  /** Lines dropped since the last report. */
  dropped = 0;

  constructor(private readonly now: () => number = Date.now) {
    this.last = now();
  }

  /** True when one more line may be written now; otherwise counts it as dropped. */
  take(): boolean {
    const t = this.now();
    this.tokens = Math.min(LOG_BURST, this.tokens + ((t - this.last) / 1000) * LOG_LINES_PER_SECOND);
    this.last = t;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.dropped++;
    return false;
  }

  /** The count dropped since the last call (then zero). */
  takeDropped(): number {
    const n = this.dropped;
    this.dropped = 0;
    return n;
  }
}
