// "Did you mean ...?" for a misspelt name (config keys, plugin names, capabilities, body fields).
import { closest, distance } from "fastest-levenshtein";

/** " (did you mean X?)" when a candidate is close enough to be a typo of `name`, else "". */
export function suggest(name: string, candidates: readonly string[]): string {
  // A name far longer than every candidate is no typo of one (and distance() is quadratic in it).
  if (candidates.length === 0 || name.length > 2 * Math.max(...candidates.map((c) => c.length)) + 8) return "";
  const lower = name.toLowerCase();
  const lowered = candidates.map((c) => c.toLowerCase());
  const other = closest(lower, lowered);
  const best = candidates[lowered.indexOf(other)]!;
  // closest() always answers; offer it only when at most a third of the letters differ.
  const close =
    distance(lower, other) <= Math.max(1, Math.floor(Math.max(lower.length, other.length) / 3)) ||
    (lower.length >= 3 && (other.startsWith(lower) || lower.startsWith(other))) ||
    swapsTwo(lower, other);
  return close ? ` (did you mean ${best}?)` : "";
}

/** Whether `a` is `b` with two neighbouring letters swapped ("gaurd" for "guard": two edits apart). */
function swapsTwo(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  const diff: number[] = [];
  for (let i = 0; i < a.length && diff.length <= 2; i++) if (a[i] !== b[i]) diff.push(i);
  return diff.length === 2 && diff[1] === diff[0]! + 1 && a[diff[0]!] === b[diff[1]!] && a[diff[1]!] === b[diff[0]!];
}
