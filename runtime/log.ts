// Structured log lines (one JSON object per line on stderr). HOOKBOX_LOG=debug|info|warn|error|silent.
const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
export type { LogLevel } from "../hooks/logger.ts";
import type { LogLevel } from "../hooks/logger.ts";
import { printable } from "./util/printable.ts";

/** HOOKBOX_LOG's level, and what is wrong with it when it names none (the default is used then). */
export function logThreshold(raw = globalThis.process?.env?.HOOKBOX_LOG ?? ""): { level: number; problem?: string } {
  if (raw === "") return { level: LEVELS.info };
  const level = LEVELS[raw.trim().toLowerCase() as keyof typeof LEVELS];
  if (level !== undefined) return { level };
  return { level: LEVELS.info, problem: `HOOKBOX_LOG=${raw} is not a log level (${Object.keys(LEVELS).join(", ")}); using info` };
}

const configured = logThreshold();
let minLevel = configured.level;

/** Tests and benches turn the noise down without touching the environment. */
export function setLogLevel(level: keyof typeof LEVELS): void {
  minLevel = LEVELS[level];
}

export function log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
  if (LEVELS[level] < minLevel) return;
  try {
    // JSON.stringify escapes C0 controls only: a plugin's C1 controls (U+009B opens a terminal
    // sequence), bidi overrides and line separators in its log lines or errors are escaped too.
    process.stderr.write(printable(JSON.stringify({ t: new Date().toISOString(), level, msg, ...fields })) + "\n");
  } catch {
    // stderr is gone (Deno throws where Node emits 'error', below): the line is lost, not the process.
  }
}

// A log line written to a closed terminal or pipe (SIGHUP: the terminal that ran the server closed)
// fails with EIO or EPIPE; unheard, that error ended the process before its shutdown could drain.
process.stderr?.on?.("error", () => {});

// Said once, at start: a misspelt level would otherwise silently log at info.
if (configured.problem) log("warn", configured.problem);
