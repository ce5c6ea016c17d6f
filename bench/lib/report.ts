// The run's one table (stdout) and its JSON record (bench/results/<timestamp>.json). Ratios are
// always taken within the same run: the machine is shared and absolute figures drift.
import { mkdirSync, writeFileSync } from "node:fs";
import { arch, cpus, platform } from "node:os";
import { join } from "node:path";

export interface Row {
  group: string;
  case: string;
  plugins?: number;
  sessions?: number;
  /** Mean time per event / operation, ms. */
  mean_ms?: number;
  p99_ms?: number;
  /** Operations (requests) per second. */
  ops_per_s?: number;
  samples?: number;
  /** Against this group's baseline (the floor, the bare delete, the unmetered call). */
  ratio?: number;
  ratio_p99?: number;
  /** Target rows: whether the goal is met. */
  met?: boolean;
  note?: string;
}

const num = (x: number | undefined, digits: number) => (x === undefined || !Number.isFinite(x) ? "" : x.toFixed(digits));
const fixed = (x: number | undefined) => (x === undefined ? "" : x >= 100 ? num(x, 1) : x >= 1 ? num(x, 3) : num(x, 4));

const COLUMNS: ReadonlyArray<[title: string, cell: (r: Row) => string, right: boolean]> = [
  ["group", (r) => r.group, false],
  ["case", (r) => r.case, false],
  ["mean ms", (r) => fixed(r.mean_ms), true],
  ["p99 ms", (r) => fixed(r.p99_ms), true],
  ["ops/s", (r) => num(r.ops_per_s, 0), true],
  ["ratio", (r) => (r.ratio === undefined ? "" : `${num(r.ratio, 2)}x`), true],
  ["ratio p99", (r) => (r.ratio_p99 === undefined ? "" : `${num(r.ratio_p99, 2)}x`), true],
  ["n", (r) => (r.samples === undefined ? "" : String(r.samples)), true],
  ["target", (r) => (r.met === undefined ? "" : r.met ? "MET" : "MISSED"), false],
  ["note", (r) => r.note ?? "", false],
];

export function formatTable(rows: readonly Row[]): string {
  const cells = rows.map((r) => COLUMNS.map(([, cell]) => cell(r)));
  const widths = COLUMNS.map(([title], i) => Math.max(title.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: string[]) =>
    "| " + values.map((v, i) => (COLUMNS[i]![2] ? v.padStart(widths[i]!) : v.padEnd(widths[i]!))).join(" | ") + " |";
  const rule = "|" + widths.map((w, i) => (COLUMNS[i]![2] ? "-".repeat(w + 1) + ":" : "-".repeat(w + 2))).join("|") + "|";
  return [line(COLUMNS.map(([t]) => t)), rule, ...cells.map(line)].join("\n");
}

/** The runtime this run used: figures from Node and Deno are not comparable. */
export function runtimeName(): string {
  const deno = (globalThis as { Deno?: { version: { deno: string } } }).Deno;
  return deno ? `deno ${deno.version.deno}` : `node ${process.versions.node}`;
}

export function writeResults(dir: string, quick: boolean, rows: readonly Row[]): string {
  mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const file = join(dir, `${stamp}.json`);
  const machine = { platform: platform(), arch: arch(), cpus: cpus().length, cpu: cpus()[0]?.model ?? "unknown" };
  writeFileSync(file, JSON.stringify({ date: new Date().toISOString(), runtime: runtimeName(), quick, machine, rows }, null, 2) + "\n");
  return file;
}
