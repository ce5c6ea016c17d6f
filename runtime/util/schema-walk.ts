// Reading valibot schemas as data: the fields an object schema allows (for "unknown field ... did
// you mean" messages) and the leaves of the config schema (for their environment variables).
import * as v from "valibot";
import { suggest } from "./suggest.ts";

type AnySchema = {
  type: string;
  kind?: string;
  wrapped?: AnySchema;
  entries?: Record<string, AnySchema>;
  options?: AnySchema[];
  item?: AnySchema;
  literal?: unknown;
  value?: AnySchema;
  pipe?: AnySchema[];
  /** A whole record (hooks/whole-record.ts): the valibot record it checks with. */
  record?: AnySchema;
};

/** Through optional/nullable wrappers, and from a custom check into the object schema piped after it. */
function unwrap(s: AnySchema): AnySchema {
  if (s.wrapped) return unwrap(s.wrapped);
  if (s.record) return s.record;
  const piped = s.type === "custom" ? s.pipe?.find((x) => x.kind === "schema" && x.type !== "custom") : undefined;
  return piped ? unwrap(piped) : s;
}

/** The object schemas that may sit at `path` inside `schema` (several for a variant). */
/** The alternatives of a variant/union (a picklist's `options` are values, not schemas). */
const alternatives = (s: AnySchema): AnySchema[] | undefined => (s.type === "variant" || s.type === "union" ? s.options!.map(unwrap) : undefined);

function objectsAt(schema: AnySchema, path: Array<string | number>): AnySchema[] {
  let here = [unwrap(schema)];
  for (const key of path) {
    const next: AnySchema[] = [];
    for (const s of here.flatMap((x) => alternatives(x) ?? [x])) {
      if (s.entries && typeof key === "string" && s.entries[key]) next.push(unwrap(s.entries[key]));
      else if (s.type === "array" && s.item) next.push(unwrap(s.item));
      else if (s.type === "record" && s.value) next.push(unwrap(s.value));
    }
    here = next;
  }
  return here.flatMap((x) => alternatives(x) ?? [x]).filter((x) => x.entries);
}

/** Every literal field of `o` (a variant's tag) holds that value in `input`. */
function matchesTags(o: AnySchema, input: unknown): boolean {
  if (typeof input !== "object" || input === null) return false;
  return Object.entries(o.entries!).every(([k, e]) => unwrap(e).type !== "literal" || (input as Record<string, unknown>)[k] === unwrap(e).literal);
}

/** One readable line per issue; an unknown field is named, with the nearest allowed field. */
export function describeIssue(schema: v.GenericSchema, issue: v.BaseIssue<unknown>): { path: string; message: string } {
  const keys = (issue.path ?? []).map((p) => p.key as string | number);
  const path = v.getDotPath(issue) ?? "";
  const field = String(keys.at(-1));
  const parent = issue.path?.at(-1)?.input;
  const objects = issue.expected === "never" && keys.length > 0 ? objectsAt(schema as unknown as AnySchema, keys.slice(0, -1)) : [];
  // A variant's alternatives: the one the input's own tag picks (a key of another alternative is
  // unknown here too), all of them when none matches.
  const tagged = objects.filter((o) => matchesTags(o, parent));
  const entries = (tagged.length > 0 ? tagged : objects).flatMap((o) => Object.entries(o.entries!));
  // A strict object's extra key (a field declared v.never() keeps its own message, and is not
  // offered as allowed: the body may never carry it).
  if (issue.expected === "never" && keys.length > 0 && !entries.some(([k]) => k === field)) {
    const allowed = entries.filter(([, e]) => unwrap(e).type !== "never").map(([k]) => k);
    const known = allowed.length ? `; allowed: ${[...new Set(allowed)].join(", ")}` : "";
    return { path, message: `unknown field "${field}"${suggest(field, allowed)}${known}` };
  }
  // A required field left out: said so, not "Invalid key: Expected "x" but received undefined".
  if (issue.kind === "schema" && issue.received === "undefined" && /object$/.test(issue.type) && keys.length > 0) {
    return { path, message: `missing required field "${field}"` };
  }
  return { path, message: issue.message };
}

/**
 * Paths in `input` where an array stands for an object the schema wants (an object or a record):
 * valibot takes an array for either, so `"plugins": []` ran on the defaults and `"grants": ["kv"]`
 * was read as a plugin named "0" (an outside probe).
 */
export function arraysForObjects(schema: v.GenericSchema, input: unknown): string[] {
  const found: string[] = [];
  const walk = (s: AnySchema, value: unknown, path: string[]) => {
    if (typeof value !== "object" || value === null) return;
    const options = (alternatives(unwrap(s)) ?? [unwrap(s)]).filter((o) => o.entries || o.type === "record");
    if (options.length === 0) return;
    if (Array.isArray(value)) return void found.push(path.join(".") || "(root)");
    for (const o of options) {
      for (const [k, child] of Object.entries(value)) {
        const next = o.entries ? o.entries[k] : o.value;
        if (next) walk(next, child, [...path, k]);
      }
    }
  };
  walk(schema as unknown as AnySchema, input, []);
  return [...new Set(found)];
}

export type LeafKind = "string" | "choice" | "number" | "list" | "json";

function leafKind(s: AnySchema): LeafKind {
  if (s.type === "picklist") return "choice";
  if (s.type === "number" || s.type === "unknown" || (s.type === "literal" && typeof s.literal === "number")) return "number";
  if (s.type === "array") return "list";
  if (s.type === "record") return "json";
  return "string";
}

/** Every settable leaf of an object schema, as a key path and how to read it from text. */
export function schemaLeaves(schema: v.GenericSchema): Array<{ path: string[]; kind: LeafKind }> {
  const out = new Map<string, { path: string[]; kind: LeafKind }>();
  const walk = (s: AnySchema, path: string[]) => {
    s = unwrap(s);
    const options = alternatives(s) ?? [s];
    const objects = options.filter((o) => o.entries);
    if (objects.length) {
      for (const o of objects) for (const [k, child] of Object.entries(o.entries ?? {})) walk(child, [...path, k]);
      return;
    }
    // A union of values (0 or an age) is a leaf too: a number when any of them is one.
    const kinds = options.map(leafKind);
    out.set(path.join("."), { path, kind: kinds.includes("number") ? "number" : kinds[0]! });
  };
  walk(schema as unknown as AnySchema, []);
  return [...out.values()];
}
