// Every tool the model may call: the built-ins and the tools plugins declare in their manifests.
// One name space, no silent collision: a built-in's name is refused with that reason (the plugin
// fails to load); a name two plugins declare runs for neither, as a command does (whichever loaded
// first would otherwise get the other's callers and their arguments) until the operator disables
// all but one. Arguments are checked against the tool's JSON Schema here, before any tool runs.
import { Validator, type Schema } from "@cfworker/json-schema";
import type { MissingCommand } from "../commands/registry.ts";
import type { ToolSpec } from "../providers/types.ts";
import { checkThread } from "./check-client.ts";
import { describeIssues } from "./issues.ts";

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
  /**
   * Set where a check may run on the server's thread: a built-in's (the core's schema), or a plugin
   * tool's whose schema is plain (isPlainSchema: a check of a few values costs little).
   */
  validator?: Validator;
  /** A plugin tool's schema (without the keywords the host does not check), checked in the check thread. */
  schema: unknown;
  schemaId: number;
}

let schemaIds = 0;

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
  private specsCache: { tools: Tool[]; specs: ToolSpec[] } | null = null;

  constructor(builtins: Iterable<Tool> = []) {
    for (const t of builtins) this.register(t);
  }

  /**
   * Throws ToolNameTaken, as register would, for a plugin tool named as a built-in: a plugin's load
   * checks it first, so that reason is said before any other (a missing tool_ export).
   */
  refuseBuiltinName(name: string): void {
    if (this.tools.get(name)?.tool.plugin === undefined && this.tools.has(name)) throw nameTaken(name, undefined);
  }

  /**
   * Registers a tool. A built-in's name cannot be taken (throws ToolNameTaken). A plugin tool whose
   * name another plugin declares too is live for neither: the conflict is returned.
   */
  register(tool: Tool): ToolConflict | undefined {
    const name = tool.spec.name;
    const owner = this.tools.get(name)?.tool;
    if (owner && (!owner.plugin || !tool.plugin)) throw nameTaken(name, owner.plugin);
    // draft 2020-12, short-circuit off: every issue is reported back to the model at once.
    // A plugin's schema is checked without the keywords whose check has no bound (see schemaProblem),
    // in the check thread: what the check costs is the plugin's to choose (check-client.ts).
    const builtin = tool.plugin === undefined;
    const schema = builtin ? tool.spec.parameters : checkedSchema(tool.spec.parameters);
    const inThread = builtin || isPlainSchema(schema);
    const entry: Entry = { tool, schema, schemaId: ++schemaIds, ...(inThread ? { validator: new Validator(schema as Schema, "2020-12", false) } : {}) };
    if (!builtin) void checkThread().start().catch(() => undefined); // up before the first call
    if (builtin) {
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

  /**
   * Tells the registry which enabled plugin that is not running (failed to load, quarantined) also
   * declares a plugin tool's name: the tool then runs for neither, as for two running claimants (a
   * squatter took over the tool of a plugin whose module broke, and got its callers' arguments).
   */
  rivalsFrom(find: (tool: string, plugin: string) => string | undefined): void {
    this.rival = find;
    this.specsCache = null;
  }
  private rival: ((tool: string, plugin: string) => string | undefined) | undefined;

  /**
   * Tells the registry which plugin declares a tool name it has no live tool for, and why that
   * plugin does not serve it (failed to load, quarantined, disabled, starting): a call of it is
   * answered so, not "unknown tool"; one of a starting plugin's waits for its start.
   */
  whyMissing(explain: (tool: string) => MissingCommand | undefined): void {
    this.declarer = explain;
  }
  private declarer: ((tool: string) => MissingCommand | undefined) | undefined;

  /** The plugin that declares `name` but does not serve it now, and why (undefined: none does). */
  notServing(name: string): MissingCommand | undefined {
    return this.tools.has(name) ? undefined : this.declarer?.(name);
  }

  /** The live tool `name`, unless a plugin that is not running declares it too. */
  get(name: string): Tool | undefined {
    const tool = this.tools.get(name)?.tool;
    return tool?.plugin !== undefined && this.rival?.(name, tool.plugin) !== undefined ? undefined : tool;
  }

  /** Why `name` is no live tool, for the model and the turn's answer. */
  missing(name: string): string {
    const claims = (this.claims.get(name) ?? []).map((c) => c.tool.plugin!);
    const live = this.tools.get(name)?.tool.plugin;
    const rival = live !== undefined ? this.rival?.(name, live) : undefined;
    if (rival !== undefined) claims.push(rival);
    if (claims.length > 1) return `tool ${name} is declared by plugins ${claims.join(" and ")}; it runs for neither until the operator disables all but one`;
    const why = this.notServing(name);
    if (why) return `tool ${name} is a tool of plugin ${why.plugin}, which is ${why.status}${why.reason ? ` (${why.reason})` : ""}`;
    return `unknown tool ${name}`;
  }

  /** The tools offered to the model, in name order (stable prompts), but the plugin tools `withheld` names. */
  specs(withheld?: (plugin: string, tool: string) => boolean): ToolSpec[] {
    if (!this.specsCache) {
      const tools = [...this.tools.values()].map((e) => e.tool).sort((a, b) => (a.spec.name < b.spec.name ? -1 : 1));
      this.specsCache = { tools, specs: tools.map((t) => t.spec) };
    }
    const { tools, specs } = this.specsCache;
    const hidden = (t: Tool) => t.plugin !== undefined && (withheld?.(t.plugin, t.spec.name) === true || this.rival?.(t.spec.name, t.plugin) !== undefined);
    return tools.some(hidden) ? tools.filter((t) => !hidden(t)).map((t) => t.spec) : specs;
  }

  /** Why `args` do not fit `name`'s schema (one line per issue), or null when they do. */
  async check(name: string, args: Record<string, unknown>): Promise<string | null> {
    const e = this.tools.get(name);
    if (!e) return `unknown tool ${name}`;
    const values = scanValues(args);
    // Sent to the check thread, arguments are copied on this thread (a 150 MB string held it ~1 s).
    if (values.chars > MAX_ARGS_CHARS) return TOO_LARGE;
    if (values.count > MAX_ARGS_VALUES) return TOO_MANY;
    // JSON.parse reads 1e999 as Infinity, which passes a "number" check and reaches the tool as null.
    if (values.nonFinite) return "a number in the arguments is beyond what JSON can carry (1e999 reads as Infinity)";
    // A built-in's check, or a plain schema's on a few values, runs here (a thread round trip would
    // be a third of a turn that calls a small tool); any other in the check thread.
    const few = values.count <= MAX_INLINE_VALUES && values.chars <= MAX_INLINE_CHARS && values.longestName <= MAX_INLINE_NAME;
    if (!e.validator || (e.tool.plugin !== undefined && !few)) return await checkThread().check(e.schemaId, e.schema, args, name);
    const res = e.validator.validate(args);
    return res.valid ? null : describeIssues(res.errors);
  }
}

/**
 * The most JSON values a plugin tool's arguments may hold to be checked on the server's thread
 * against a plain schema: each is checked against one subschema of at most PLAIN_LIST_MAX
 * properties, required names and enum values (a failure each: 256 empty objects against 32
 * required names make 8,192 issues, a few ms), so a check stays within a few ms.
 */
const MAX_INLINE_VALUES = 256;
/**
 * ... and at most this much text, and no property name longer than MAX_INLINE_NAME: every issue's
 * location holds its value's property names (a 1 MB name under 250 failing items cost 0.9 s and
 * 250 MB there).
 */
const MAX_INLINE_CHARS = 16_384;
const MAX_INLINE_NAME = 256;
/** Characters of strings and property names beyond which arguments are refused unchecked. */
const MAX_ARGS_CHARS = 1_048_576;

/** JSON values beyond which arguments are refused unchecked (a million zeros hold no text at all). */
const MAX_ARGS_VALUES = 100_000;

/** Why `args` are too large for any tool (more than MAX_ARGS_CHARS of text and names, or MAX_ARGS_VALUES values), or null. */
export function argumentsTooLarge(args: Record<string, unknown>): string | null {
  const { chars, count } = scanValues(args);
  return chars > MAX_ARGS_CHARS ? TOO_LARGE : count > MAX_ARGS_VALUES ? TOO_MANY : null;
}
const TOO_LARGE = `the arguments hold more than ${MAX_ARGS_CHARS.toLocaleString("en-US")} characters of text and names: too large to check`;
const TOO_MANY = `the arguments hold more than ${MAX_ARGS_VALUES.toLocaleString("en-US")} values: too large to check`;
const PLAIN_LIST_MAX = 32;

/** Keywords of a plain schema (no keyword that applies several subschemas to one value). */
const PLAIN_KEYWORDS: ReadonlySet<string> = new Set([
  "type", "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "nullable",
  "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minProperties", "maxProperties",
  "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum", "const",
]);

/**
 * Whether `schema` is plain: only PLAIN_KEYWORDS, each list (type, properties, required, enum) at
 * most PLAIN_LIST_MAX long and enum/const at most 1 KB of JSON, and so on in every subschema. A
 * value is then checked against one subschema, whose work is bounded: what tools mostly declare.
 */
function isPlainSchema(schema: unknown): boolean {
  if (typeof schema === "boolean") return true;
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return false;
  for (const [k, v] of Object.entries(schema)) {
    if (!PLAIN_KEYWORDS.has(k)) return false;
    if ((k === "enum" || k === "const") && JSON.stringify(v ?? null).length > 1_024) return false;
    if (Array.isArray(v) && v.length > PLAIN_LIST_MAX) return false;
    if (k === "properties") {
      if (typeof v !== "object" || v === null || Object.keys(v).length > PLAIN_LIST_MAX) return false;
      if (!Object.values(v).every(isPlainSchema)) return false;
    }
    if ((k === "items" || k === "additionalProperties") && !isPlainSchema(v)) return false;
  }
  return true;
}

/**
 * The JSON values in `v` (itself included), the characters of its strings and property names
 * (counted until they pass MAX_ARGS_CHARS: a string referenced many times counts each time, as a
 * copy to the check thread copies it each time), its longest property name, and whether a number
 * among them is not finite.
 */
function scanValues(v: unknown): { count: number; chars: number; longestName: number; nonFinite: boolean } {
  let count = 0;
  let chars = 0;
  let longestName = 0;
  let nonFinite = false;
  const stack: unknown[] = [v];
  while (stack.length > 0 && chars <= MAX_ARGS_CHARS && count <= MAX_ARGS_VALUES) {
    const x = stack.pop();
    count++;
    if (typeof x === "number") nonFinite ||= !Number.isFinite(x);
    else if (typeof x === "string") chars += x.length;
    else if (Array.isArray(x)) for (const child of x) stack.push(child);
    else if (typeof x === "object" && x !== null) {
      for (const [name, child] of Object.entries(x)) {
        chars += name.length;
        longestName = Math.max(longestName, name.length);
        stack.push(child);
      }
    }
  }
  return { count, chars, longestName, nonFinite };
}

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
  // fromEntries defines own properties: `out[k] = ...` with k "__proto__" would set the copy's prototype.
  return Object.fromEntries(Object.entries(schema).filter(([k]) => !UNCHECKED.has(k)).map(([k, v]) => [k, mapSubschemas(k, v, checkedSchema)]));
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
const JSON_TYPES = new Set(["object", "array", "string", "number", "integer", "boolean", "null"]);
const validType = (t: unknown) => (Array.isArray(t) ? t.length > 0 && t.every((x) => JSON_TYPES.has(x)) && new Set(t).size === t.length : JSON_TYPES.has(t as string));

function walkSchema(schema: unknown): string | { unchecked: string[] } {
  let count = 0;
  const unchecked: string[] = [];
  const walk = (node: unknown, path: string, depth: number): string | null => {
    if (typeof node !== "object" || node === null || Array.isArray(node)) return null; // true/false schemas
    if (depth > SCHEMA_LIMITS.depth) return `nested deeper than ${SCHEMA_LIMITS.depth} levels at ${path}`;
    if (++count > SCHEMA_LIMITS.subschemas) return `more than ${SCHEMA_LIMITS.subschemas} subschemas`;
    for (const [k, v] of Object.entries(node)) {
      // JSON.parse makes "__proto__" an own key; a validator (and a copy made with obj[k] = v) reads
      // it as the prototype, whose keywords no walk sees: a refused keyword hid there and ran the
      // argument check on the server's thread for seconds (an independent review).
      if (k === "__proto__" || (NAMED.has(k) && typeof v === "object" && v !== null && Object.hasOwn(v, "__proto__"))) {
        return `"__proto__" (at ${path}${k === "__proto__" ? "" : `/${k}`}) is not allowed in a plugin tool's schema`;
      }
      if (REFUSED.has(k)) return `"${k}" (at ${path}) is not allowed in a plugin tool's schema: its check has no bound on the host's work`;
      // The validator compiles {"type":"nonsense"} (no value then passes), and a provider that checks
      // the tools it is sent refuses it: every model call of every session failed (an outside probe).
      if (k === "type" && !validType(v)) return `"type" (at ${path}) must be one of ${[...JSON_TYPES].join(", ")}, or an array of them`;
      if (UNCHECKED.has(k)) unchecked.push(`"${k}" at ${path}`);
      let problem: string | null = null;
      mapSubschemas(k, v, (child, at) => (problem ??= walk(child, `${path}/${at}`, depth + 1)));
      if (problem) return problem;
    }
    return null;
  };
  return walk(schema, "#", 0) ?? { unchecked };
}

const nameTaken = (name: string, plugin: string | undefined) =>
  new ToolNameTaken(`tool "${name}" is already declared by ${plugin ? `plugin ${plugin}` : "the core (built-in)"}`);
