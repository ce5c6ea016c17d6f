// Small async locks. SQLite allows one writer at a time and libSQL's embedded client runs each
// statement synchronously on a pooled connection, so two write transactions open at once in the
// same process would block the event loop on the file lock (SQLITE_BUSY). We queue them instead.

/** A FIFO async mutex. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  async run<T>(fn: () => Promise<T> | T): Promise<T> {
    let release!: () => void;
    const next = new Promise<void>((r) => (release = r));
    const prev = this.tail;
    this.tail = prev.then(() => next);
    await prev;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

/** One FIFO mutex per key (e.g. per session id); idle keys are forgotten. */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T> | T): Promise<T> {
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const prev = this.tails.get(key) ?? Promise.resolve();
    const tail = prev.then(() => mine);
    this.tails.set(key, tail);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
