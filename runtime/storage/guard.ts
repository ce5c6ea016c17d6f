// A condition a write batch (one transaction) requires: a statement that fails the whole batch when
// the condition is false, so nothing of it commits. SQLite has no RAISE outside triggers, but it
// documents abs() of the smallest integer as an "integer overflow" error.
export const failUnless = (condition: string): string => `select abs(-9223372036854775808) where not (${condition})`;

/** True when a batch failed on a failUnless statement. */
export const isGuardFailure = (err: unknown): boolean => /integer overflow/i.test(String((err as Error)?.message ?? err));

/** The same for a quota, told apart by its error: a blob larger than SQLite allows ("too big"). */
export const failUnlessWithinQuota = (condition: string): string => `select zeroblob(9223372036854775807) where not (${condition})`;
export const isQuotaFailure = (err: unknown): boolean => /too big/i.test(String((err as Error)?.message ?? err));
