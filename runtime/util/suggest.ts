// "Did you mean ...?" for a misspelt name (config keys, plugin names, capabilities, body fields).
import { closest, distance } from "fastest-levenshtein";

/** " (did you mean X?)" when a candidate is close enough to be a typo of `name`, else "". */
export function suggest(name: string, candidates: readonly string[]): string {
  if (candidates.length === 0) return "";
  const lower = name.toLowerCase();
  const best = closest(lower, [...candidates]);
  // closest() always answers; offer it only when at most a third of the letters differ.
  const other = best.toLowerCase();
  const close =
    distance(lower, other) <= Math.max(1, Math.floor(Math.max(lower.length, other.length) / 3)) ||
    (lower.length >= 3 && (other.startsWith(lower) || lower.startsWith(other)));
  return close ? ` (did you mean ${best}?)` : "";
}
