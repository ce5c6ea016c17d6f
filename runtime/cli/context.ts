// What every CLI subcommand gets: where to print, the configuration, and the core (opened on first
// use, closed by runCli). A subcommand module exports `register...(parent: Command, ctx)`.
import { InvalidArgumentError } from "commander";
import * as v from "valibot";
import { Id } from "../http/validate.ts";
import { MAX_AGE_DAYS, MIN_AGE_DAYS, type Config } from "../config.ts";
import type { Core } from "../core.ts";

export interface CliIO {
  out(line: string): void;
  err(line: string): void;
}

export interface CliContext {
  readonly io: CliIO;
  /** The effective configuration (loaded on first use). */
  config(): Config;
  /** The core (on `config`, default the effective one), with the plugin runtime; opened once, closed after the command. */
  core(config?: Config): Promise<Core>;
  /** A usage error (exit 2): print it with a hint to the command's --help. */
  usage(message: string): Error;
}

/** A command line the user got wrong (exit 2), as opposed to a command that failed (exit 1). */
export class UsageError extends Error {
  override name = "UsageError";
}

/** Option parser: a whole number in [min, max]. */
export const wholeNumber =
  (min: number, max = Number.MAX_SAFE_INTEGER) =>
  (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < min || n > max) throw new InvalidArgumentError(`must be a whole number from ${min} to ${max}`);
    return n;
  };

/** Argument parser: a session id as the API takes one (another is a usage error, as the API's 400 `invalid_id`). */
export function sessionId(value: string): string {
  if (!v.is(Id, value)) throw new InvalidArgumentError(`not a session id: ids are 1-128 chars of [A-Za-z0-9_-]`);
  return value;
}

/** Argument parser for `<ids...>`: each a session id. */
export const sessionIds = (value: string, previous: string[] = []): string[] => [...previous, sessionId(value)];

/** An age in days that selects "not updated for that long" (prune, idle archive): at least an hour (config.ts MIN_AGE_DAYS). */
export const ageInDays = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < MIN_AGE_DAYS || n > MAX_AGE_DAYS) {
    throw new InvalidArgumentError(`must be a number of days from 1/24 (an hour, 0.0417) to ${MAX_AGE_DAYS}: less would select every session`);
  }
  return n;
};

/** Option parser: a number above (or, with `orZero`, at least) 0. */
export const positiveNumber =
  (orZero = false) =>
  (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n) || n < 0 || (!orZero && n === 0)) {
      throw new InvalidArgumentError(orZero ? "must be a number of at least 0" : "must be a number above 0");
    }
    return n;
  };
