// Every body, query and path parameter goes through valibot here; failures become 400 with the
// issues listed, before any service runs (so nothing is half-written).
import * as v from "valibot";
import type { Context } from "hono";
import { AppError } from "../errors.ts";
import { describeIssue } from "../util/schema-walk.ts";
import { bodyUnreadable } from "./errors.ts";

export const Id = v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{1,128}$/, "ids are 1-128 chars of [A-Za-z0-9_-]"));
export const Profile = v.pipe(v.string(), v.regex(/^[A-Za-z0-9._-]{1,64}$/, "profiles are 1-64 chars of [A-Za-z0-9._-]"));
const Text = (max: number) => v.pipe(v.string(), v.maxLength(max));
const isObject = (x: unknown) => typeof x === "object" && x !== null && !Array.isArray(x);
/** For docs: the object schema each "must be a JSON object" check is piped into. */
export const OBJECT_AFTER_CHECK = new WeakMap<object, v.GenericSchema>();

// valibot's object schemas accept arrays (objects without extra keys); nested objects say no first.
const sourceIsObject = v.custom<Record<string, unknown>>(isObject, "must be a JSON object");
// A NUL is refused: the embedded database's reader ends a text at it ("alice\u0000evil" was stored
// whole and read back, by commands and plugins, as "alice"; an outside probe), as in messages.
// A lone surrogate becomes U+FFFD (as storage would make it): a plugin given it back as WTF-8 bytes
// had its KV call refused as not UTF-8.
const SourceText = v.pipe(
  Text(256),
  v.check((s) => !s.includes("\u0000"), "a NUL character (U+0000) cannot be stored"),
  v.transform((s) => s.toWellFormed()),
);
const SourceFields = v.strictObject({
  user_id: v.optional(v.nullable(SourceText)),
  chat_id: v.optional(v.nullable(SourceText)),
  thread_id: v.optional(v.nullable(SourceText)),
});
OBJECT_AFTER_CHECK.set(sourceIsObject, SourceFields);
export const SourceInput = v.pipe(sourceIsObject, SourceFields);
export const Platform = v.pipe(v.string(), v.regex(/^[A-Za-z0-9._-]{1,64}$/, "platforms are 1-64 chars of [A-Za-z0-9._-]"));

function fail(code: string, what: string, schema: v.GenericSchema, issues: v.BaseIssue<unknown>[]): never {
  // An unknown field is named (with the nearest allowed one), not "Expected never but received ...".
  const list = issues.map((i) => describeIssue(schema, i));
  const first = list[0]!;
  throw new AppError(400, code, `invalid ${what}: ${first.path ? `${first.path}: ` : ""}${first.message}`, list);
}

export function check<S extends v.GenericSchema>(schema: S, input: unknown, what: string, code = "invalid_body"): v.InferOutput<S> {
  const res = v.safeParse(schema, input);
  if (!res.success) fail(code, what, schema, res.issues);
  return res.output;
}

/**
 * Refuses a query on a route that takes none: ignored, `?dry_run=true` on a delete or a sweep
 * deleted for real (an outside probe).
 */
export function noQuery(c: Context, hint = ""): void {
  const names = Object.keys(c.req.queries());
  if (names.length === 0) return;
  const listed = names.slice(0, 5).map((n) => JSON.stringify(n.slice(0, 64))).join(", ");
  throw new AppError(400, "invalid_query", `invalid query: ${c.req.method} ${c.req.path.slice(0, 200)} takes no query parameters (got ${listed})${hint}`);
}

/** Parses and validates the JSON body (an empty body counts as {}); the route takes no query. */
export async function readBody<S extends v.GenericSchema>(c: Context, schema: S): Promise<v.InferOutput<S>> {
  // Pointing at the body helps only where the body takes something (enable?force=1 was told to
  // put its options there, which take none; an outside probe).
  const entries = (schema as { entries?: object }).entries;
  noQuery(c, entries && Object.keys(entries).length === 0 ? "" : "; its options go in the JSON body");
  // A client that hangs up while sending fails the read with ECONNRESET or "aborted": its own doing,
  // not the database's (which that error text was taken for: a 503 and an error-level log line).
  const text = await c.req.text().catch((err: unknown) => {
    throw bodyUnreadable(err);
  });
  let json: unknown = {};
  if (text.trim() !== "") {
    try {
      json = JSON.parse(text);
    } catch {
      throw new AppError(400, "invalid_json", "request body is not valid JSON");
    }
  }
  if (!isObject(json)) {
    throw new AppError(400, "invalid_body", "request body must be a JSON object");
  }
  return check(schema, json, "body");
}

export function readQuery<S extends v.GenericSchema>(c: Context, schema: S): v.InferOutput<S> {
  // A parameter given twice (?limit=5&limit=x) is refused: query() keeps the first, the rest unseen.
  const repeated = Object.entries(c.req.queries()).find(([, values]) => values.length > 1);
  if (repeated) throw new AppError(400, "invalid_query", `invalid query: ${repeated[0]}: given ${repeated[1].length} times, takes one value`);
  return check(schema, c.req.query(), "query", "invalid_query");
}

export function readId(c: Context, name = "id"): string {
  return check(Id, c.req.param(name), `path parameter ${name}`, "invalid_id");
}

/** Query strings are text: these turn them into typed values with clear errors. */
export const QueryInt = (min: number, max: number) =>
  v.pipe(
    v.string(),
    v.regex(/^\d{1,9}$/, `must be a whole number from ${min} to ${max}`),
    v.description(`a whole number from ${min} to ${max}`), // the range, in the OpenAPI document too
    v.transform(Number),
    v.minValue(min),
    v.maxValue(max),
  );
export const QueryBool = v.pipe(v.picklist(["true", "false"]), v.transform((s) => s === "true"));
