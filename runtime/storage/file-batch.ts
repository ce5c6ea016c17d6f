// storage.batch on an embedded file: the fixed statements of a hot write path (a turn's append, a
// KV group commit) as ONE write transaction on a native connection whose prepared statements are
// kept. Through @libsql/client every statement was prepared anew and its columns and rows converted
// one property at a time: about 0.2 ms of a 1 ms turn. Results keep the client's shape (rows with
// both indexed and named columns; rowsAffected for statements that return no rows), so callers
// work the same against a server.
import { Buffer } from "node:buffer";
import type { InArgs, InStatement, InValue, ResultSet, Row } from "@libsql/client";
import { openNative, StatementCache, type NativeDatabase, type SqlArg } from "./native.ts";

/** The open transaction of a batch, to a ReadingStep: its statements run on the batch's connection (kept prepared). */
export interface BatchConnection {
  /** Rows as arrays. */
  all(sql: string, args: readonly SqlArg[]): unknown[][];
  /** Rows changed. */
  run(sql: string, args: readonly SqlArg[]): number;
}

/**
 * A batch item whose writes depend on what it reads in the batch's transaction. On the embedded file
 * `inFile` runs there, on the transaction's connection, and returns the rows it changed; on a server
 * (a batch is one request, no interactive transaction) `statements` run instead: the same change as
 * set-based SQL. Either way its result is one ResultSet (on a server, its last statement's).
 */
export interface ReadingStep {
  statements: InStatement[];
  inFile(conn: BatchConnection): number;
}

export type BatchItem = InStatement | ReadingStep;

export const isReadingStep = (item: BatchItem): item is ReadingStep => typeof item === "object" && "inFile" in item;

export class FileBatchWriter {
  private readonly db: NativeDatabase;
  private readonly statements: StatementCache;
  /** Column names per statement: asked of the driver once. */
  private readonly columns = new WeakMap<object, string[]>();

  /** `pragmas`: per-connection settings the writer needs (durability, cache size). */
  constructor(path: string, pragmas: readonly string[]) {
    this.db = openNative(path);
    for (const p of pragmas) this.db.exec(p);
    this.statements = new StatementCache(this.db, true);
  }

  /** Runs `stmts` in one BEGIN IMMEDIATE transaction: all of them commit, or none (the error is thrown). */
  batch(items: readonly BatchItem[]): ResultSet[] {
    this.db.exec("BEGIN IMMEDIATE");
    try {
      const results = items.map((s) =>
        typeof s === "string" ? this.run(s, []) : isReadingStep(s) ? resultSet([], [], s.inFile(this.conn), undefined) : this.run(s.sql, s.args ?? []),
      );
      this.db.exec("COMMIT");
      return results;
    } catch (err) {
      try {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
      } catch {
        // The statement's error is the one to report; SQLite rolls back on its own what it can.
      }
      throw err;
    }
  }

  private readonly conn: BatchConnection = {
    all: (sql, args) => this.statements.get(sql).all(args) as unknown[][],
    run: (sql, args) => this.statements.get(sql).run(args).changes,
  };

  /** Copies what it can of the WAL into the database without waiting on readers or writers. */
  checkpoint(): void {
    this.statements.get("PRAGMA wal_checkpoint(PASSIVE)").all([]);
  }

  close(): void {
    // Kept statements hold the connection in the driver: dropped first.
    this.statements.clear();
    this.db.close();
  }

  private run(sql: string, given: InArgs): ResultSet {
    if (!Array.isArray(given)) throw new TypeError("storage.batch: named arguments are not supported on the embedded file");
    const args = given.map(toSql);
    const stmt = this.statements.get(sql);
    if (!stmt.reader) {
      const info = stmt.run(args);
      return resultSet([], [], info.changes, BigInt(info.lastInsertRowid));
    }
    let columns = this.columns.get(stmt);
    if (!columns) this.columns.set(stmt, (columns = stmt.columns().map((c) => c.name)));
    const rows = stmt.all(args) as unknown[][];
    // As the client does: a name that is already a key (an index, "length", a duplicate) is skipped.
    for (const row of rows) {
      for (let i = 0; i < columns.length; i++) if (!Object.hasOwn(row, columns[i]!)) (row as unknown as Record<string, unknown>)[columns[i]!] = row[i];
    }
    // As the client does: a statement that returns rows reports no rowsAffected.
    return resultSet(columns, rows as unknown as Row[], 0, undefined);
  }
}

/** The client's conversions of values the native driver does not take (booleans, dates). */
function toSql(v: InValue): SqlArg {
  if (typeof v === "boolean") return v ? 1 : 0;
  if (v instanceof Date) return v.valueOf();
  if (v instanceof ArrayBuffer) return Buffer.from(v) as unknown as SqlArg;
  if (v === undefined) throw new TypeError("storage.batch: undefined is not a value (use null)");
  return v as SqlArg;
}

function resultSet(columns: string[], rows: Row[], rowsAffected: number, lastInsertRowid: bigint | undefined): ResultSet {
  return {
    columns,
    columnTypes: columns.map(() => ""),
    rows,
    rowsAffected,
    lastInsertRowid,
    toJSON: () => ({ columns, rows, rowsAffected, lastInsertRowid: lastInsertRowid?.toString() }),
  };
}
