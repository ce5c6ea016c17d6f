// Work started for requests, counted until it has settled: a request's handler, and a streamed
// turn until its end. A connection is not the measure: a turn whose client went away runs on, and
// a shutdown that counted connections closed the plugins (then the database) under it: a blocked
// tool ran, hooks went undelivered, a bulk delete's on_session_delete never fired (an outside probe).
export class InFlight {
  private count = 0;

  /** Work still running. */
  get size(): number {
    return this.count;
  }

  /** Counts `work` until it settles; returns it as it is. */
  track<T>(work: Promise<T>): Promise<T> {
    this.count++;
    const done = () => void this.count--;
    work.then(done, done);
    return work;
  }
}
