// Row types of the libSQL schema (see migrations.ts), as Kysely sees them.
import type { ColumnType, Generated } from "kysely";

export interface SessionsTable {
  id: string;
  profile: string;
  platform: string;
  user_id: string | null;
  chat_id: string | null;
  thread_id: string | null;
  /** Child sessions are deleted with their parent. */
  parent_session_id: string | null;
  /** Compaction chain: the session this one was rotated from. Deleted with its descendant chain. */
  compacted_from: string | null;
  archived: ColumnType<number, number | undefined, number>;
  ended_at: number | null;
  end_reason: string | null;
  token_estimate: ColumnType<number, number | undefined, number>;
  last_compaction_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface MessagesTable {
  id: Generated<number>;
  session_id: string;
  seq: number;
  /** user | assistant | system | tool | summary */
  role: string;
  content: string;
  tool_name: string | null;
  tokens: number;
  created_at: number;
}

export interface PluginKvTable {
  plugin: string;
  /** "" for plugin-wide keys; otherwise the session the key belongs to. */
  session_id: string;
  key: string;
  value: string;
  updated_at: number;
}

export interface PluginKvUsageTable {
  plugin: string;
  keys: number;
  bytes: number;
}

/** A deleted session whose plugin KV is kept until on_session_delete has run (then purged). */
export interface SessionTombstonesTable {
  id: string;
  deleted_at: number;
}

export interface IdempotencyTable {
  key: string;
  /** Hash of method, path and body: a reused key with another request is refused. */
  request_hash: string;
  status: number;
  response: string;
  /** The stored response's content type (a streamed turn's is text/event-stream). */
  content_type: Generated<string>;
  created_at: number;
}

export interface PluginStateTable {
  name: string;
  /** Operator override from `plugins enable|disable`: 1, 0, or null for "as configured". */
  enabled: number | null;
  quarantined: string | null;
  updated_at: number;
}

/** How a plugin keys state of sessions in a scope (its hookbox_kv_delete_sessions sweeps): the sweep re-applies them to deleted sessions. */
export interface KvSweepPatternsTable {
  plugin: string;
  session_id: string;
  prefix: string;
  /** 1: every `prefix + id + ":" + ...`; 0: `prefix + id`. */
  by_id_prefix: number;
}

export interface Database {
  sessions: SessionsTable;
  messages: MessagesTable;
  plugin_kv: PluginKvTable;
  plugin_kv_usage: PluginKvUsageTable;
  session_tombstones: SessionTombstonesTable;
  idempotency: IdempotencyTable;
  plugin_state: PluginStateTable;
  kv_sweep_patterns: KvSweepPatternsTable;
}
