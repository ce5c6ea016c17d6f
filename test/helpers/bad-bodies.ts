// Generates malformed requests for every mutating endpoint: bodies that are not JSON objects, every
// field given each wrong type, oversized and badly formed strings, unknown fields, malformed and
// missing path ids, and requests that are well formed but refer to what cannot be done. Each one
// must be refused with a 4xx and change nothing.

/** One generated request; `route` is the app's route pattern it exercises ("POST /v1/sessions/:id/turns"). */
export interface BadRequest {
  route: string;
  name: string;
  method: string;
  path: string;
  /** Raw body text (already serialized), or undefined for none. */
  body?: string;
  headers?: Record<string, string>;
  /** An exact status when the case pins one; otherwise any 4xx. */
  status?: number;
}

/** Rows the generator refers to; the test creates them first. */
export interface Fixtures {
  /** An open session with messages. */
  open: string;
  /** An ended session. */
  ended: string;
  /** A session in profile "other" (for a profile mismatch with a child). */
  otherProfile: string;
}

const HUGE = "x".repeat(1_000_000); // under the 4 MiB body limit: validation, not the limit, must refuse it
const NOT_STRINGS: unknown[] = [42, -1.5, true, null, [], ["a"], {}, { a: 1 }];
const NOT_NUMBERS: unknown[] = ["1", true, null, [], {}, [1]];
const NOT_BOOLEANS: unknown[] = ["true", 1, 0, null, [], {}];
/** Breaks an [A-Za-z0-9_-]{1,max} style name: empty, spaces, punctuation, unicode, controls, too long. */
const badNames = (max: number): unknown[] => [
  ...NOT_STRINGS,
  "",
  "has space",
  "semi;colon",
  "sl/ash",
  "../up",
  "ü",
  "emoji😀",
  "nul\u0000byte",
  "new\nline",
  "x".repeat(max + 1),
  HUGE,
];
const badIds = badNames(128);
const badProfiles = [...badNames(64).filter((x) => x !== "../up"), "a/b"];
const badText = (max: number, nullable = false): unknown[] => [
  ...NOT_STRINGS.filter((x) => !(nullable && x === null)),
  "x".repeat(max + 1),
  HUGE,
];
const badSources: unknown[] = [
  "u1",
  42,
  true,
  [],
  [{ user_id: "u" }],
  { user_id: "u", admin: true },
  { role: "admin" },
  ...badText(256, true).map((user_id) => ({ user_id })),
  ...badText(256, true).map((chat_id) => ({ chat_id })),
  ...badText(256, true).map((thread_id) => ({ thread_id })),
  // Stored whole, read back cut at the NUL: "alice" to commands and plugins.
  { user_id: "alice\u0000evil" },
  { chat_id: "c\u0000" },
  { thread_id: "\u0000" },
];
const badIdArrays: unknown[] = [
  "s_1",
  42,
  null,
  {},
  { 0: "s_1" },
  ...badIds.filter((x) => typeof x === "string" || x === null).map((id) => [id]),
  ["s_ok", 7],
  Array.from({ length: 100_001 }, (_, i) => `s_${i}`),
];

/** Field name -> values that must each be refused, plus a valid base body (empty when all optional). */
interface EndpointSpec {
  route: string;
  method: string;
  path: string;
  base: Record<string, unknown>;
  fields: Record<string, unknown[]>;
  /** Well-formed bodies the service must still refuse (conflicts, missing references, ...). */
  refused?: Array<{ name: string; body: unknown; status: number }>;
}

function endpoints(f: Fixtures): EndpointSpec[] {
  const sid = (p: string) => `/v1/sessions/${f.open}${p}`;
  return [
    {
      route: "POST /v1/sessions",
      method: "POST",
      path: "/v1/sessions",
      base: { profile: "work", platform: "cli", source: { user_id: "u" } },
      fields: { profile: badProfiles, platform: badProfiles, source: badSources, parent_session_id: badIds },
      refused: [
        { name: "missing parent", body: { parent_session_id: "s_missing" }, status: 422 },
        { name: "child in another profile", body: { parent_session_id: f.otherProfile, profile: "work" }, status: 422 },
      ],
    },
    {
      route: "POST /v1/sessions/bulk-delete",
      method: "POST",
      path: "/v1/sessions/bulk-delete",
      base: { ids: [f.open] },
      fields: { ids: badIdArrays },
      refused: [
        { name: "both ids and profile", body: { ids: [f.open], profile: "default" }, status: 400 },
        { name: "neither ids nor profile", body: {}, status: 400 },
        { name: "bad profile", body: { profile: "no such/profile" }, status: 400 },
      ],
    },
    {
      route: "POST /v1/sessions/adopt",
      method: "POST",
      path: "/v1/sessions/adopt",
      base: { ids: [f.open], profile: "work" },
      fields: { ids: [...badIdArrays, []], profile: badProfiles },
      refused: [{ name: "no profile", body: { ids: [f.open] }, status: 400 }],
    },
    {
      route: "POST /v1/sessions/:id/turns",
      method: "POST",
      path: sid("/turns"),
      base: { message: "hello" },
      fields: { message: ["", "keep this\u0000 and this too", ...badText(100_000)] },
      refused: [
        { name: "turn on an ended session", body: { message: "hi" }, status: 409 },
        { name: "no message", body: {}, status: 400 },
      ],
    },
    {
      route: "POST /v1/sessions/:id/compress",
      method: "POST",
      path: sid("/compress"),
      base: { kind: "summarize" },
      fields: { kind: ["bogus", "SUMMARIZE", "", ...NOT_STRINGS], rotate: NOT_BOOLEANS },
      refused: [{ name: "compress an ended session", body: {}, status: 409 }],
    },
    { route: "POST /v1/sessions/:id/archive", method: "POST", path: sid("/archive"), base: {}, fields: {} },
    { route: "POST /v1/sessions/:id/unarchive", method: "POST", path: sid("/unarchive"), base: {}, fields: {} },
    {
      route: "POST /v1/sessions/:id/end",
      method: "POST",
      path: sid("/end"),
      base: { reason: "user" },
      fields: { reason: ["", "UPPER", "has space", "x".repeat(65), ...NOT_STRINGS.filter((x) => x !== null), null] },
    },
    {
      route: "POST /v1/sessions/:id/reset",
      method: "POST",
      path: sid("/reset"),
      base: {},
      fields: {},
      refused: [{ name: "reset an ended session", body: {}, status: 409 }],
    },
    { route: "DELETE /v1/sessions/:id", method: "DELETE", path: `/v1/sessions/${f.open}`, base: {}, fields: {} },
    ...["empty_sweep", "prune", "ghost_prune", "profile_repair", "idle_archive", "hygiene"].map(
      (task): EndpointSpec => ({
        route: "POST /v1/maintenance/:task",
        method: "POST",
        path: `/v1/maintenance/${task}`,
        base: {},
        fields:
          task === "empty_sweep"
            ? { grace_seconds: [...NOT_NUMBERS, -1, 31_536_001] }
            : task === "prune"
              ? { older_than_days: [...NOT_NUMBERS, -1, 36_501] }
              : task === "idle_archive"
                ? { older_than_days: [...NOT_NUMBERS, -1, 0, 36_501] }
                : {},
      }),
    ),
    {
      route: "POST /v1/plugins/:name/:action",
      method: "POST",
      path: "/v1/plugins/nothing/enable",
      base: {},
      fields: {},
      refused: [{ name: "unknown plugin", body: {}, status: 404 }],
    },
    {
      route: "POST /v1/commands/:name",
      method: "POST",
      path: "/v1/commands/commands",
      base: { raw_args: "" },
      fields: { raw_args: [...badText(10_000), "a\u0000b"], session_id: badIds, platform: badProfiles, source: badSources },
    },
  ];
}

/** Paths with a malformed parameter, per route pattern (every one must be a 4xx, most 400). */
function badPaths(f: Fixtures): Array<Omit<BadRequest, "name"> & { name?: string }> {
  const ids = ["bad%20id", "x".repeat(129), "%C3%BC", "a.b", "%00", "a%2Fb", "..", "%F0%9F%98%80", "s_missing"];
  const out: Array<Omit<BadRequest, "name"> & { name?: string }> = [];
  for (const id of ids) {
    const status = id === "s_missing" ? 404 : undefined;
    for (const [suffix, body] of [["/turns", { message: "hi" }], ["/compress", {}], ["/archive", {}], ["/unarchive", {}], ["/end", {}], ["/reset", {}]] as const) {
      out.push({ route: `POST /v1/sessions/:id${suffix}`, method: "POST", path: `/v1/sessions/${id}${suffix}`, body: JSON.stringify(body), status });
    }
    out.push({ route: "DELETE /v1/sessions/:id", method: "DELETE", path: `/v1/sessions/${id}`, status });
  }
  for (const task of ["everything", "EMPTY_SWEEP", "%00", "x".repeat(300)]) {
    out.push({ route: "POST /v1/maintenance/:task", method: "POST", path: `/v1/maintenance/${task}`, body: "{}", status: 400 });
  }
  for (const [name, action] of [["UPPER", "enable"], ["bad%20name", "disable"], ["x".repeat(65), "enable"], ["nothing", "explode"], ["nothing", "ENABLE"]]) {
    out.push({ route: "POST /v1/plugins/:name/:action", method: "POST", path: `/v1/plugins/${name}/${action}`, body: "{}", status: 400 });
  }
  for (const name of ["bad!", "%20", "x".repeat(65)]) {
    out.push({ route: "POST /v1/commands/:name", method: "POST", path: `/v1/commands/${name}`, body: "{}", status: 400 });
  }
  // Well-formed commands that must still be refused: unknown, or built-ins used wrongly.
  out.push({ route: "POST /v1/commands/:name", method: "POST", path: "/v1/commands/nosuch", body: "{}", status: 404 });
  out.push({ route: "POST /v1/commands/:name", method: "POST", path: "/v1/commands/exit", body: "{}", status: 422 });
  out.push({ route: "POST /v1/commands/:name", method: "POST", path: "/v1/commands/compress", body: JSON.stringify({ session_id: f.open, raw_args: "bogus" }), status: 422 });
  out.push({ route: "POST /v1/commands/:name", method: "POST", path: "/v1/commands/exit", body: JSON.stringify({ session_id: f.open, raw_args: "--destroy" }), status: 422 });
  return out;
}

/** Bodies that are not a JSON object at all, or are broken JSON. */
export const NON_OBJECT_BODIES: string[] = [
  "{",
  "}",
  '{"a":1,}',
  "{'a':1}",
  "[]",
  "[1,2]",
  "null",
  "42",
  '"text"',
  "true",
  "\u0000",
  "NaN",
  '{"a":1}{"b":2}',
  "[".repeat(50_000) + "]".repeat(50_000),
  '{"source":' + "[".repeat(50_000) + "]".repeat(50_000) + "}",
];

/** Every generated bad request, with a readable name. */
export function badRequests(f: Fixtures): BadRequest[] {
  const out: BadRequest[] = [];
  const show = (x: unknown) => {
    const s = JSON.stringify(x) ?? String(x);
    return s.length > 40 ? `${s.slice(0, 37)}...(${s.length})` : s;
  };
  for (const e of endpoints(f)) {
    const at = `${e.method} ${e.path.replace(f.open, ":open")}`;
    const add = (name: string, body: string | undefined, status?: number, path = e.path) =>
      out.push({ route: e.route, name: `${at} ${name}`, method: e.method, path, body, ...(status ? { status } : {}) });
    if (e.method !== "DELETE") {
      for (const raw of NON_OBJECT_BODIES) add(`body ${show(raw)}`, raw, 400);
      add("unknown field", JSON.stringify({ ...e.base, unexpected: 1 }), 400);
      add("__proto__ field", JSON.stringify(e.base).replace(/^\{/, '{"__proto__":{"admin":true},').replace(/,\}$/, "}"), 400);
      add("constructor field", JSON.stringify({ ...e.base, constructor: { prototype: {} } }), 400);
      add("oversized body", JSON.stringify({ ...e.base, pad: "x".repeat(5 * 1024 * 1024) }), 413);
    }
    for (const [field, values] of Object.entries(e.fields)) {
      for (const value of values) add(`${field}=${show(value)}`, JSON.stringify({ ...e.base, [field]: value }), 400);
    }
    // A valid request but for a query the route does not take: ignored, ?dry_run=true deleted for real.
    add("query ?dry_run=true", e.method === "DELETE" ? undefined : JSON.stringify(e.base), 400, `${e.path}?dry_run=true`);
    for (const r of e.refused ?? []) {
      const path = r.status === 409 ? e.path.replace(f.open, f.ended) : e.path;
      add(r.name, JSON.stringify(r.body), r.status, path);
    }
  }
  for (const p of badPaths(f)) out.push({ ...p, name: p.name ?? `${p.method} ${p.path.length > 60 ? p.path.slice(0, 57) + "..." : p.path}` });
  return out;
}

/** Idempotency-Key values the API must refuse outright (400). */
export const BAD_IDEMPOTENCY_KEYS = ["has space", "tab\tkey", "x".repeat(201), "caf\u00e9", "quote\"d k"];
