// The native libsql driver (the one @libsql/client uses for file: URLs), opened directly where the
// client falls short on an embedded file: synchronous reads (sync-reader.ts) and statements that are
// prepared once and kept (file-batch.ts); the client prepares every statement anew, which cost about
// as much as running a turn's small statements.
import { createRequire } from "node:module";

export type SqlArg = string | number | bigint | null;

export interface NativeStatement {
  raw(on?: boolean): NativeStatement;
  /** Whether the statement returns rows. */
  readonly reader: boolean;
  columns(): Array<{ name: string }>;
  // One parameter, the argument array: a lone argument that is an object (null) would otherwise be
  // taken for named parameters.
  all(args: readonly SqlArg[]): unknown[];
  get(args: readonly SqlArg[]): unknown;
  run(args: readonly SqlArg[]): { changes: number; lastInsertRowid: number | bigint };
}

export interface NativeDatabase {
  prepare(sql: string): NativeStatement;
  exec(sql: string): void;
  readonly inTransaction: boolean;
  close(): void;
}

/** A connection of our own to the database file; `timeout` is its busy timeout, ms. */
export function openNative(path: string, timeout = 5000): NativeDatabase {
  // A native addon with a CommonJS entry: loaded through require, on Node and on Deno alike.
  const Database = createRequire(import.meta.url)("libsql") as new (path: string, opts: { timeout: number }) => NativeDatabase;
  return new Database(path, { timeout });
}

/**
 * Prepared statements of one connection, kept by SQL text for the connection's life: for the few
 * fixed statements of hot paths, not for SQL built from values (that would grow without bound).
 */
export class StatementCache {
  private readonly statements = new Map<string, NativeStatement>();

  constructor(
    private readonly db: NativeDatabase,
    /** Rows as arrays (raw) or as objects keyed by column name. */
    private readonly raw: boolean,
  ) {}

  get(sql: string): NativeStatement {
    let stmt = this.statements.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      if (this.raw && stmt.reader) stmt.raw(true);
      this.statements.set(sql, stmt);
    }
    return stmt;
  }

  /** Drops the statements (before the connection closes: each holds it in the driver). */
  clear(): void {
    this.statements.clear();
  }
}
