// Every tool the model may call: the built-ins and the tools plugins declare in their manifests.
// One name space, no silent collision: a built-in's name is refused with that reason (the plugin
// fails to load); a name two plugins declare runs for neither, as a command does (whichever loaded
// first would otherwise get the other's callers and their arguments) until the operator disables
// all but one. Arguments are checked against the tool's JSON Schema here, before any tool runs.
import { Validator, type Schema } from "@cfworker/json-schema";
import type { ToolSpec } from "../providers/types.ts";

/** Who is calling: the turn and the tool call id, passed through to plugin tools. */
export interface ToolCallContext {
  session_id: string;
  turn_id: string;
  tool_call_id: string;
}

export interface Tool {
  spec: ToolSpec;
  /** The plugin that declared it; undefined for a built-in. */
  plugin?: string | undefined;
  run(args: Record<string, unknown>, call: ToolCallContext): Promise<string> | string;
}

export class ToolNameTaken extends Error {
  override name = "ToolNameTaken";
}

interface Entry {
  tool: Tool;
  validator: Validator;
  /** The check's work per JSON value at each depth of the arguments (see checkWork). */
  work: number[];
}

/** A tool name more than one plugin declares: it runs for none of them. */
export interface ToolConflict {
  name: string;
  plugins: string[];
}

export class ToolRegistry {
  /** The live tools: built-ins, and plugin tools whose name one plugin alone declares. */
  private readonly tools = new Map<string, Entry>();
  /** Every plugin's claim per name, in registration order. */
  private readonly claims = new Map<string, Entry[]>();
  private specsCache: ToolSpec[] | null = null;

  constructor(builtins: Iterable<Tool> = []) {
    for (const t of builtins) this.register(t);
  }

  /**
   * Registers a tool. A built-in's name cannot be taken (throws ToolNameTaken). A plugin tool whose
   * name another plugin declares too is live for neither: the conflict is returned.
   */
  register(tool: Tool): ToolConflict | undefined {
    const name = tool.spec.name;
    const owner = this.tools.get(name)?.tool;
    if (owner && (!owner.plugin || !tool.plugin)) {
      throw new ToolNameTaken(`tool "${name}" is already declared by ${owner.plugin ? `plugin ${owner.plugin}` : "the core (built-in)"}`);
    }
    // draft 2020-12, short-circuit off: every issue is reported back to the model at once.
    // A plugin's schema is checked without the keywords whose check has no bound (see schemaProblem).
    const schema = tool.plugin === undefined ? tool.spec.parameters : checkedSchema(tool.spec.parameters);
    const entry = { tool, validator: new Validator(schema as Schema, "2020-12", false), work: checkWork(schema) };
    if (tool.plugin === undefined) {
      this.tools.set(name, entry);
      this.specsCache = null;
      return undefined;
    }
    this.claims.set(name, [...(this.claims.get(name) ?? []), entry]);
    return this.settle(name);
  }

  /** Makes a name's only plugin claim live, or none when it is contested. */
  private settle(name: string): ToolConflict | undefined {
    const claims = this.claims.get(name) ?? [];
    if (claims.length === 0) this.claims.delete(name);
    if (claims.length === 1) this.tools.set(name, claims[0]!);
    else this.tools.delete(name);
    this.specsCache = null;
    return claims.length > 1 ? { name, plugins: claims.map((c) => c.tool.plugin!) } : undefined;
  }

  /** Removes every tool `plugin` declared (disable, unload); a conflict it was in may resolve. */
  unregisterPlugin(plugin: string): void {
    for (const [name, claims] of this.claims) {
      const rest = claims.filter((c) => c.tool.plugin !== plugin);
      if (rest.length === claims.length) continue;
      this.claims.set(name, rest);
      this.settle(name);
    }
  }

  get(name: string): Tool | undefined {
    return this.tools.get(name)?.tool;
  }

  /** Why `name` is no live tool, for the model and the turn's answer. */
  missing(name: string): string {
    const claims = this.claims.get(name) ?? [];
    if (claims.length > 1) return `tool ${name} is declared by plugins ${claims.map((c) => c.tool.plugin).join(" and ")}; it runs for neither until the operator disables all but one`;
    return `unknown tool ${name}`;
  }

  /** The tools offered to the model, in name order (stable prompts). */
  specs(): ToolSpec[] {
    return (this.specsCache ??= [...this.tools.values()].map((e) => e.tool.spec).sort((a, b) => (a.name < b.name ? -1 : 1)));
  }

  /** Why `args` do not fit `name`'s schema (one line per issue), or null when they do. */
  check(name: string, args: Record<string, unknown>): string | null {
    const e = this.tools.get(name);
    if (!e) return `unknown tool ${name}`;
    // The validator checks each value against every subschema that applies to it and keeps every
    // failure: schemas that apply many subschemas, enum values or required names to many argument
    // values (2,000 anyOf branches, 999 allOf branches, 6,500 required names; values a plugin's
    // pre_tool_call or the model writes) held the thread 16-25 s or ran Node's heap out. The work
    // is counted before the check (values at each depth times the work there) and bounded.
    const scan = scanValues(args, e.work);
    if (scan.work > MAX_CHECK_WORK) {
      return `the arguments are too large to check against tool ${name}'s schema: checking their ${scan.values.toLocaleString("en-US")} JSON values would take more than ${MAX_CHECK_WORK.toLocaleString("en-US")} checks (fewer values, or a smaller schema)`;
    }
    // JSON.parse reads 1e999 as Infinity, which passes a "number" check and reaches the tool as null.
    if (scan.nonFinite) return "a number in the arguments is beyond what JSON can carry (1e999 reads as Infinity)";
    const res = e.validator.validate(args);
    if (res.valid) return null;
    // The deepest issues say what is wrong; the outer ones only repeat "properties failed". An issue
    // is outer when another one's locations extend both of its own: told by one pass over the
    // locations' prefixes (comparing every pair held the thread for seconds at 16,000 issues), over
    // the first MAX_ISSUES_READ issues (the refusal names 20).
    const errors = res.errors.slice(0, MAX_ISSUES_READ);
    const outer = new Set<string>();
    for (const y of errors) {
      const keywords = prefixesOf(y.keywordLocation).slice(0, -1); // shorter than y's own
      for (const at of prefixesOf(y.instanceLocation)) for (const kw of keywords) outer.add(`${at}\u0000${kw}`);
    }
    const isOuter = (x: (typeof errors)[number]) => outer.has(`${x.instanceLocation}\u0000${x.keywordLocation}`);
    const leaves = errors.filter((x) => !isOuter(x));
    const shown = leaves.length > 0 ? leaves : errors;
    // anyOf's branches may fail alike: each issue is told once.
    const lines = [...new Set(shown.map((x) => `${x.instanceLocation || "#"}: ${x.error}`.slice(0, 300)))];
    const more = lines.length - MAX_ISSUES_SHOWN;
    lines.length = Math.min(lines.length, MAX_ISSUES_SHOWN);
    if (more > 0) lines.push(`and ${more}${errors.length < res.errors.length ? "+" : ""} more`);
    return lines.join("; ");
  }
}

/**
 * The most work one argument check may take, in checks of one value against one subschema: about
 * 1.5-2 us each where they fail (@cfworker/json-schema on Node, every failure kept), so at most
 * ~20 ms on the thread. Real tools stay far below it (a dozen subschemas, tens of values).
 */
export const MAX_CHECK_WORK = 10_000;

/** Issues of one check read to find the deepest ones (the validator may report one per check). */
const MAX_ISSUES_READ = 1_000;

/**
 * The JSON values of `args` weighed by `work` (the work per value at each depth, root 0; a value
 * deeper than the schema reaches costs nothing), until the weight passes MAX_CHECK_WORK; and
 * whether a number among them is not finite.
 */
function scanValues(args: unknown, work: readonly number[]): { work: number; values: number; nonFinite: boolean } {
  let total = 0;
  let values = 0;
  let nonFinite = false;
  const stack: Array<[unknown, number]> = [[args, 0]];
  while (stack.length > 0 && total <= MAX_CHECK_WORK) {
    const [x, depth] = stack.pop()!;
    values++;
    total += work[depth] ?? 0;
    if (typeof x === "number" && !Number.isFinite(x)) nonFinite = true;
    else if (typeof x === "object" && x !== null) for (const child of Object.values(x)) stack.push([child, depth + 1]);
  }
  return { work: total, values, nonFinite };
}

/** Keywords whose subschemas apply to the same value as the schema that holds them. */
const SAME_VALUE = new Set(["allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies"]);
/** Keywords whose subschemas apply to a value's items, properties or property names. */
const CHILD_VALUE = new Set(["items", "prefixItems", "additionalItems", "contains", "unevaluatedItems", "properties", "additionalProperties", "unevaluatedProperties", "propertyNames"]);
// ($defs and definitions apply only through $ref, which a plugin's schema may not use.)

/**
 * The work of checking one JSON value at each depth below `schema` (index 0: the value itself):
 * every subschema that may apply there (without $ref, one applies at most once to a value), each
 * with the work of its own keywords: one per subschema, and per listed value of enum, const,
 * required and dependentRequired (a failed enum or const also prints its whole list into the
 * issue). A property value meets one of the named properties (the costliest counts), an item one
 * of prefixItems; additionalProperties, items, contains and the like may all apply besides.
 */
function checkWork(schema: unknown): number[] {
  const work = [1];
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return work; // true/false schemas
  const add = (w: readonly number[], below: number) => w.forEach((x, i) => (work[i + below] = (work[i + below] ?? 0) + x));
  for (const [k, v] of Object.entries(schema)) {
    work[0]! += keywordWork(k, v);
    if (SAME_VALUE.has(k)) mapSubschemas(k, v, (child) => add(checkWork(child), 0));
    else if (k === "properties" || k === "prefixItems") {
      const each: number[][] = [];
      mapSubschemas(k, v, (child) => each.push(checkWork(child)));
      add(each.reduce((m, w) => w.map((x, i) => Math.max(x, m[i] ?? 0)).concat(m.slice(w.length)), [] as number[]), 1);
    } else if (CHILD_VALUE.has(k)) mapSubschemas(k, v, (child) => add(checkWork(child), 1));
  }
  return work;
}

/** The work of one keyword's own check on a value, beyond its subschemas (see checkWork). */
function keywordWork(k: string, v: unknown): number {
  if (k === "enum" || k === "const") return Math.ceil((Array.isArray(v) ? v.length : 1) / 16 + JSON.stringify(v ?? null).length / 64);
  if (k === "required") return Array.isArray(v) ? v.length : 0;
  if (k === "dependentRequired" && typeof v === "object" && v !== null) return Object.values(v).reduce((n: number, names) => n + (Array.isArray(names) ? names.length : 0), 0);
  return 0;
}

/** `a/b/c` -> ["", "a", "a/b", "a/b/c"]: a location and the locations it is within. */
function prefixesOf(location: string): string[] {
  const out = [""];
  for (let i = location.indexOf("/"); i >= 0; i = location.indexOf("/", i + 1)) if (i > 0) out.push(location.slice(0, i));
  if (location !== "") out.push(location);
  return out;
}

/** Issues of one argument check named in its refusal (it goes into the history and the answer). */
const MAX_ISSUES_SHOWN = 20;

/**
 * Checks that a manifest's `parameters` is a usable JSON Schema (compiles) whose checks cost the host
 * a bounded amount of work; the reason otherwise. A plugin's schema is checked on the host's thread
 * (at load, and for every call's arguments, which a plugin's pre_tool_call may rewrite), so `$ref`
 * (a chain of `allOf` over refs doubles the work per level) and `patternProperties` (a regex per
 * property name) are refused, and the schema is at most SCHEMA_LIMITS in size and depth. `pattern`,
 * `format` and `uniqueItems` (a backtracking regex such as `^(a+)+$`, or the validator's own format
 * regexes: its "url" backtracks exponentially on "http://aaaa...!"; quadratic in the array) are kept
 * for the model but not checked by the host (uncheckedKeywords says where; the plugin checks them).
 */
export function schemaProblem(schema: unknown): string | null {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return "must be a JSON Schema object";
  if ((schema as { type?: unknown }).type !== "object") return 'must describe an object ("type": "object")';
  if (JSON.stringify(schema).length > SCHEMA_LIMITS.bytes) return `larger than ${SCHEMA_LIMITS.bytes} bytes`;
  const walked = walkSchema(schema);
  if (typeof walked === "string") return walked;
  try {
    new Validator(checkedSchema(schema) as Schema, "2020-12").validate({});
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Where a plugin tool's schema has keywords the host does not check (`pattern` at #/properties/s). */
export function uncheckedKeywords(schema: unknown): string[] {
  const walked = walkSchema(schema);
  return typeof walked === "string" ? [] : walked.unchecked;
}

/** `schema` without the keywords the host does not check (at subschema positions only). */
export function checkedSchema(schema: unknown): unknown {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) if (!UNCHECKED.has(k)) out[k] = mapSubschemas(k, v, checkedSchema);
  return out;
}

export const SCHEMA_LIMITS = { bytes: 64 * 1024, depth: 32, subschemas: 2_000 } as const;

/** Keywords a plugin tool's schema may not use: their check has no bound on the host's work. */
const REFUSED = new Set(["$ref", "$dynamicRef", "$recursiveRef", "patternProperties"]);
/** Keywords kept for the model but not checked by the host (see schemaProblem). */
const UNCHECKED = new Set(["pattern", "uniqueItems", "format"]);
/** Keywords whose value is one subschema, an array of them, or a map of names to them. */
const ONE = new Set(["items", "additionalItems", "additionalProperties", "unevaluatedItems", "unevaluatedProperties", "not", "if", "then", "else", "contains", "propertyNames"]);
const MANY = new Set(["allOf", "anyOf", "oneOf", "prefixItems"]);
const NAMED = new Set(["properties", "$defs", "definitions", "dependentSchemas", "dependencies"]);

/**
 * The value of keyword `k` with `f` applied to each subschema it holds (`at`: where, from the
 * keyword: "items", "allOf/1", "properties/name"); any other value as it is. The one place that
 * knows which keywords hold subschemas, for walking a schema and for rewriting it.
 */
function mapSubschemas(k: string, v: unknown, f: (child: unknown, at: string) => unknown): unknown {
  if (ONE.has(k) || (MANY.has(k) && Array.isArray(v))) return Array.isArray(v) ? v.map((child, i) => f(child, `${k}/${i}`)) : f(v, k);
  if (NAMED.has(k) && typeof v === "object" && v !== null) return Object.fromEntries(Object.entries(v).map(([name, child]) => [name, f(child, `${k}/${name}`)]));
  return v;
}

/** Walks the subschemas (a property may be named "pattern"): the first refusal, or where the unchecked keywords are. */
function walkSchema(schema: unknown): string | { unchecked: string[] } {
  let count = 0;
  const unchecked: string[] = [];
  const walk = (node: unknown, path: string, depth: number): string | null => {
    if (typeof node !== "object" || node === null || Array.isArray(node)) return null; // true/false schemas
    if (depth > SCHEMA_LIMITS.depth) return `nested deeper than ${SCHEMA_LIMITS.depth} levels at ${path}`;
    if (++count > SCHEMA_LIMITS.subschemas) return `more than ${SCHEMA_LIMITS.subschemas} subschemas`;
    for (const [k, v] of Object.entries(node)) {
      if (REFUSED.has(k)) return `"${k}" (at ${path}) is not allowed in a plugin tool's schema: its check has no bound on the host's work`;
      if (UNCHECKED.has(k)) unchecked.push(`"${k}" at ${path}`);
      let problem: string | null = null;
      mapSubschemas(k, v, (child, at) => (problem ??= walk(child, `${path}/${at}`, depth + 1)));
      if (problem) return problem;
    }
    return null;
  };
  return walk(schema, "#", 0) ?? { unchecked };
}
