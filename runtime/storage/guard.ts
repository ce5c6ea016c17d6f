// A condition a write batch (one transaction) requires: a statement that fails the whole batch when
// the condition is false, so nothing of it commits. SQLite has no RAISE outside triggers; json_extract
// with a path that is none fails with "bad JSON path: '<the path>'", and the path is ours: an error
// no other statement makes. (The quota guard was a blob too large for SQLite, "too big": a libSQL
// server's own limit on a text gives that error too, and a commit over it was taken for a quota
// failure, its writes dropped unlogged; an outside probe.)
const failing = (tag: string) => (condition: string) => `select json_extract('{}', 'hookbox: ${tag}') where not (${condition})`;
// By the path in SQLite's error about it, whose wording changed ("JSON path error near ..." before 3.45).
const failedOn = (tag: string) => {
  const pattern = new RegExp(`JSON path[^']*'hookbox: ${tag}'`);
  return (err: unknown) => pattern.test(String((err as Error)?.message ?? err));
};

export const failUnless = failing("guard");
/** True when a batch failed on a failUnless statement. */
export const isGuardFailure = failedOn("guard");

/** The same for a plugin's KV quota, told apart by its own path. */
export const failUnlessWithinQuota = failing("kv quota");
export const isQuotaFailure = failedOn("kv quota");
