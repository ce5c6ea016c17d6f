// Per-plugin KV usage (plugin_kv_usage) as deletes keep it. Inserts and updates keep it by trigger;
// deletes do not (migration 0010): a delete trigger ran a usage update per row and made every
// multi-row delete of plugin_kv two-pass (SQLite collects the rows first when a trigger may fire),
// about 5x the delete itself at 70,000 keys. So every statement that deletes plugin_kv rows comes
// after one that takes the same rows off their plugins' usage, in the same transaction.

/** A row's bytes towards its plugin's quota, as the insert and update triggers count them. */
export const ROW_BYTES = (k: string) => `octet_length(${k}.key) + octet_length(${k}.value)`;

/**
 * Takes the plugin_kv rows `from` selects off their plugins' usage: `from` is a FROM ... WHERE clause
 * over plugin_kv aliased `k` that yields each row once (an id list with duplicates would count a
 * row twice). Run it just before the delete of the same rows.
 */
export const usageOffSql = (from: string): string => `update plugin_kv_usage set keys = keys - d.n, bytes = bytes - d.b
  from (select k.plugin as plugin, count(*) as n, sum(${ROW_BYTES("k")}) as b ${from} group by k.plugin) as d
  where plugin_kv_usage.plugin = d.plugin`;

/** Takes ?2 keys and ?3 bytes off plugin ?1 (rows counted as they were read, in the same transaction). */
export const USAGE_OFF_COUNTED_SQL = "update plugin_kv_usage set keys = keys - ?2, bytes = bytes - ?3 where plugin = ?1";

/** The rows `from` selects (as for usageOffSql) taken off the usage, then deleted: two statements for one transaction. */
export const countedDelete = (from: string): [usage: string, del: string] => [
  usageOffSql(from),
  `delete from plugin_kv where (plugin, session_id, key) in (select k.plugin, k.session_id, k.key ${from})`,
];
