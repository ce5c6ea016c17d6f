// Another process holds the write lock past the busy timeout, or a libSQL server ended a transaction
// it judged stuck: the transaction was rolled back whole, so running it again is safe.
const LOCKED = /SQLITE_BUSY|database is locked|no transaction is active|TRANSACTION_CLOSED|stream expired|timed? ?out/i;
/** Retries back off from 25 ms to 500 ms, at random (two nodes retrying part), for up to 8 s in all. */
const RETRY_FIRST_MS = 25;
const RETRY_MAX_MS = 500;
const RETRY_BUDGET_MS = 8000;

/** Runs `run` (one whole transaction or statement) again while it fails on a lock, within the budget. */
export async function retryLocked<T>(run: () => Promise<T>): Promise<T> {
  const giveUpAt = Date.now() + RETRY_BUDGET_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (Date.now() >= giveUpAt || !LOCKED.test(`${(err as { code?: string }).code ?? ""} ${(err as Error).message ?? ""}`)) throw err;
      const delay = Math.min(RETRY_FIRST_MS * 2 ** attempt, RETRY_MAX_MS) * (0.5 + Math.random());
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
