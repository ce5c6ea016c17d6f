// What a failed argument check tells the model and the caller: the deepest issues (the outer ones
// only repeat "properties failed"), each once, at most MAX_ISSUES_SHOWN.
import type { OutputUnit } from "@cfworker/json-schema";

/** Issues of one check named in its refusal (it goes into the history and the answer). */
const MAX_ISSUES_SHOWN = 20;
/** Issues read to find the deepest ones (the validator may report one per value and subschema). */
const MAX_ISSUES_READ = 1_000;
/** Characters of an issue's locations compared (a property name may be 60,000 characters). */
const MAX_LOCATION_CHARS = 200;

/** One line per issue, joined with "; ". */
export function describeIssues(all: readonly OutputUnit[]): string {
  const errors = all.slice(0, MAX_ISSUES_READ).map((x) => ({
    at: x.instanceLocation.slice(0, MAX_LOCATION_CHARS),
    keyword: x.keywordLocation.slice(0, MAX_LOCATION_CHARS),
    error: x.error,
  }));
  // An issue is outer when another one's locations extend both of its own: told by one pass over
  // the locations' prefixes (comparing every pair held the thread for seconds at 16,000 issues).
  const outer = new Set<string>();
  for (const y of errors) {
    const keywords = prefixesOf(y.keyword).slice(0, -1); // shorter than y's own
    for (const at of prefixesOf(y.at)) for (const kw of keywords) outer.add(`${at}\u0000${kw}`);
  }
  const leaves = errors.filter((x) => !outer.has(`${x.at}\u0000${x.keyword}`));
  const shown = leaves.length > 0 ? leaves : errors;
  // anyOf's branches may fail alike: each issue is told once.
  const lines = [...new Set(shown.map((x) => `${x.at || "#"}: ${x.error}`.slice(0, 300)))];
  const more = lines.length - MAX_ISSUES_SHOWN;
  lines.length = Math.min(lines.length, MAX_ISSUES_SHOWN);
  if (more > 0) lines.push(`and ${more}${errors.length < all.length ? "+" : ""} more`);
  return lines.join("; ");
}

/** `a/b/c` -> ["", "a", "a/b", "a/b/c"]: a location and the locations it is within. */
function prefixesOf(location: string): string[] {
  const out = [""];
  for (let i = location.indexOf("/"); i >= 0; i = location.indexOf("/", i + 1)) if (i > 0) out.push(location.slice(0, i));
  if (location !== "") out.push(location);
  return out;
}
