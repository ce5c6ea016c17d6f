// Structured log lines (one JSON object per line on stderr). HOOKBOX_LOG=debug|info|warn|error|silent.
const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
export type { LogLevel } from "../hooks/logger.ts";
import type { LogLevel } from "../hooks/logger.ts";

function threshold(): number {
  const name = (globalThis.process?.env?.HOOKBOX_LOG ?? "info") as keyof typeof LEVELS;
  return LEVELS[name] ?? LEVELS.info;
}

let minLevel = threshold();

/** Tests and benches turn the noise down without touching the environment. */
export function setLogLevel(level: keyof typeof LEVELS): void {
  minLevel = LEVELS[level];
}

export function log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
  if (LEVELS[level] < minLevel) return;
  process.stderr.write(JSON.stringify({ t: new Date().toISOString(), level, msg, ...fields }) + "\n");
}
