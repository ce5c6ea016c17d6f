// Operator configuration: a JSON file (HOOKBOX_CONFIG, else ./hookbox.config.json when present)
// overlaid by environment variables. Validated with valibot; a bad file stops start-up with the
// exact field at fault. Capabilities are granted here and nowhere else.
import { existsSync, readFileSync } from "node:fs";
import * as v from "valibot";
import { CAPABILITY_PATTERN } from "../host-api/capabilities.ts";
import { arraysForObjects, describeIssue, schemaLeaves } from "./util/schema-walk.ts";
import { suggest } from "./util/suggest.ts";
import { log } from "./log.ts";

const Seconds = v.pipe(v.number(), v.minValue(0.001), v.maxValue(86_400));
/** A plugin's name (its folder, manifest name, config key and URL segment). */
/**
 * Names every JavaScript object answers from its prototype, and that valibot's record drops as keys
 * (a config entry for a plugin "constructor" vanished, plugins.command_users' limit with it): no
 * plugin, command or tool may take one.
 */
export const RESERVED_NAMES: ReadonlySet<string> = new Set(["constructor", "prototype", "__proto__"]);
export const notReserved = (what: string) => v.check((n: string) => !RESERVED_NAMES.has(n), (i) => `"${String(i.input)}" cannot name a ${what} (every JavaScript object has a member of that name)`);

export const PluginName = v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "plugin names are lowercase [a-z0-9_-], starting with a letter or digit, at most 64 chars"), notReserved("plugin"));

const CAPABILITY_EXAMPLES = ["kv", "sessions:read", "http:example.com"];
/** A granted capability: "kv", "sessions:read" or "http:<host>"; anything else is refused with a suggestion. */
export const Capability = v.pipe(
  v.string(),
  v.check(
    (c) => CAPABILITY_PATTERN.test(c),
    (issue) => `unknown capability ${JSON.stringify(issue.input)}${suggest(String(issue.input), CAPABILITY_EXAMPLES)}; capabilities are "kv", "sessions:read" or "http:<host>"`,
  ),
);

export const PluginLimitsSchema = v.strictObject({
  /** Instruction budget per call (fuel units ~ WASM instructions). */
  fuel: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  /** Largest linear memory, in 64 KiB pages. */
  memory_pages: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65_536))),
  /** Wall-clock limit per call, seconds (overrides plugins.hook_callback_timeout). */
  timeout_seconds: v.optional(Seconds),
  /** Largest output a call may return, bytes. */
  max_output_bytes: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
});
export type PluginLimits = v.InferOutput<typeof PluginLimitsSchema>;

/** The local provider's own settings (besides its type). */
const LOCAL_PROVIDER_KEYS = ["context_window_tokens", "native_compaction_over_tokens"];

/**
 * An age in days that selects "not updated for that long" (prune's setting and per-run override,
 * idle archive's override): at least an hour, as 0 would select every session and so did 1e-300
 * (an outside probe).
 */
export const MIN_AGE_DAYS = 1 / 24;
/** The longest such age an override takes (a hundred years). */
export const MAX_AGE_DAYS = 36_500;
export const PruneAge = v.minValue<number, number, string>(MIN_AGE_DAYS, "must be at least 1 hour (1/24 = 0.0417 days): prune deletes every session not updated for that long, and less would delete them all");

const ProviderSchema = v.variant("type", [
  v.strictObject({
    type: v.literal("local"),
    /** Simulated context window: larger prompts fail as a provider overflow (compact and retry). */
    context_window_tokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
    /** Simulated provider-native compaction above this many prompt tokens. */
    native_compaction_over_tokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  }),
  v.strictObject({
    type: v.literal("openai"),
    base_url: v.pipe(v.string(), v.url()),
    api_key: v.optional(v.string()),
    model: v.string(),
    timeout_seconds: v.optional(Seconds, 60),
  }),
]);
export type ProviderConfig = v.InferOutput<typeof ProviderSchema>;

export const ConfigSchema = v.strictObject({
  // A path without a scheme is the likeliest slip ("./data/hookbox.db"): said here, with the fix.
  db_url: v.optional(
    v.pipe(
      v.string(),
      v.check(
        (u) => /^(file|libsql|https?|wss?):/i.test(u),
        (i) =>
          /^[a-z][a-z0-9+.-]*:\/\//i.test(String(i.input))
            ? `"${String(i.input)}" is not a database hookbox can open: file:PATH for an embedded file, or libsql://, http(s)://, ws(s):// for a libSQL server`
            : `"${String(i.input)}" is not a database URL: file:PATH for an embedded file (e.g. file:${String(i.input)}), or libsql://, http(s)://, ws(s):// for a libSQL server`,
      ),
    ),
    "file:./data/hookbox.db",
  ),
  db_auth_token: v.optional(v.string()),
  /**
   * Embedded file only: "full" (default) fsyncs every commit; "normal" fsyncs the WAL only at
   * checkpoints (cheaper commits; a power cut can lose the last acknowledged ones). See storage/db.ts.
   */
  db_synchronous: v.optional(v.picklist(["full", "normal"]), "full"),
  /** Where per-session side files live; passed to plugins in on_session_delete. */
  sessions_dir: v.optional(v.string(), "./data/sessions"),
  host: v.optional(v.string(), "127.0.0.1"),
  port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(65_535)), 8787),
  // An HTTP header value is trimmed and read as Latin-1: a token with spaces or other than visible
  // ASCII could never be sent back as it is configured.
  api_token: v.optional(v.pipe(v.string(), v.regex(/^[\x21-\x7e]*$/, "api_token must be visible ASCII characters (no spaces), as an Authorization header carries it"))),
  /** On SIGTERM/SIGINT, how long in-flight requests may take to finish before they are dropped. */
  shutdown_grace_seconds: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(3_600)), 10),
  /** How long a stored Idempotency-Key answer is replayed; after that the key may be used again. */
  idempotency_ttl_seconds: v.optional(v.pipe(v.number(), v.minValue(1), v.maxValue(31_536_000)), 86_400),
  provider: v.optional(ProviderSchema, { type: "local" }),
  compaction: v.optional(
    v.strictObject({
      /** Token budget of a session's context; the automatic compactions keep under it. */
      context_budget_tokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(64)), 8_000),
      /** Minimum seconds between two automatic compactions of one session. */
      cooldown_seconds: v.optional(v.pipe(v.number(), v.minValue(0)), 30),
      /** Messages kept verbatim at the tail when summarizing. */
      keep_recent_messages: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 4),
    }),
    {},
  ),
  retention: v.optional(
    v.strictObject({
      /** `prune` deletes sessions not updated for this many days (above 0: at 0 it would delete them all). */
      prune_after_days: v.optional(v.pipe(v.number(), PruneAge), 30),
      /** Idle sessions are archived (silently) after this many days; 0 turns it off. */
      idle_archive_after_days: v.optional(v.union([v.literal(0), v.pipe(v.number(), v.minValue(MIN_AGE_DAYS, "must be 0 (off) or at least 1 hour (1/24 = 0.0417 days): less would archive every session"))]), 0),
    }),
    {},
  ),
  plugins: v.optional(
    v.strictObject({
      dir: v.optional(v.string(), "./plugins-wasm"),
      enabled: v.optional(v.array(PluginName), []),
      disabled: v.optional(v.array(PluginName), []),
      /** Capability grants per plugin: "kv", "sessions:read", "http:<host>". */
      grants: v.optional(v.record(PluginName, v.array(Capability)), {}),
      /** Seconds; edge values are normalized with a warning (see hookTimeout), never refused. */
      hook_callback_timeout: v.optional(v.unknown()),
      cooloff_seconds: v.optional(v.pipe(v.number(), v.minValue(0)), 60),
      quarantine_after: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 5),
      limits: v.optional(v.record(PluginName, PluginLimitsSchema), {}),
      /** Sensitive slash commands limited to these user_ids, per command name. */
      command_users: v.optional(v.record(v.string(), v.array(v.string())), {}),
      /** pre_tool_call plugins whose failure (trap, time-out, quarantine...) blocks the tool call. */
      fail_closed: v.optional(v.array(PluginName), []),
      /** Most characters of context one plugin may inject into one model call; more fails the call as `bad_output`. */
      max_injected_chars: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 8_000),
      /**
       * Most characters of injected context one turn carries, all plugins together: injections are
       * kept in plugin name order while they fit; the rest are dropped with a warning.
       */
      max_injected_chars_per_turn: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 16_000),
      /** Largest tool result the model sees, bytes (longer ones are cut, with a note). */
      tool_result_max_bytes: v.optional(v.pipe(v.number(), v.integer(), v.minValue(256), v.maxValue(1_048_576)), 16_384),
      /** Per plugin: most KV keys and bytes (keys + values) it may store; a write beyond fails as `quota`. */
      kv_quota: v.optional(
        v.strictObject({
          keys: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 100_000),
          bytes: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1024)), 64 * 1024 * 1024),
        }),
        {},
      ),
    }),
    {},
  ),
});
type ParsedConfig = v.InferOutput<typeof ConfigSchema>;
export type Config = Omit<ParsedConfig, "plugins"> & {
  plugins: Omit<ParsedConfig["plugins"], "hook_callback_timeout"> & { hook_callback_timeout: number };
  /** What parsing corrected (e.g. an out-of-range hook_callback_timeout); each was logged. */
  warnings: string[];
};
export type ConfigInput = v.InferInput<typeof ConfigSchema>;

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * Which environment variable set a setting of a parsed config (parseConfig's setBy), for the checks
 * made later against plugins.dir (checkPluginNames): outside the config, which `hookbox config` prints.
 */
const envOfConfig = new WeakMap<Config, (path: string) => string | undefined>();

/** Where a setting of `c` came from, as errors name it: "environment: VAR (path)" or the path. */
function settingLabel(c: Config, path: string): string {
  const name = envOfConfig.get(c)?.(path);
  return name ? `environment: ${name} (${path})` : path;
}

/** Every setting's environment variable: HOOKBOX_ + its key path in upper case ("provider.api_key" -> HOOKBOX_PROVIDER_API_KEY). */
export const ENV_SETTINGS = schemaLeaves(ConfigSchema).map((leaf) => ({ ...leaf, env: `HOOKBOX_${leaf.path.join("_").toUpperCase()}` }));

/** Overlays the environment on the file's settings (before validation, so bad values are caught the same way). */
function applyEnv(input: unknown, env: Record<string, string | undefined>): { merged: unknown; fromEnv: Map<string, string> } {
  const merged = structuredClone((input ?? {}) as Record<string, unknown>);
  const fromEnv = new Map<string, string>();
  for (const { path, kind, env: name } of ENV_SETTINGS) {
    const raw = env[name];
    // An empty value means "not set", except for lists where it means "none".
    if (raw === undefined || (raw === "" && kind !== "list")) continue;
    let value: unknown = raw;
    if (kind === "choice") value = raw.toLowerCase();
    // Plain decimals only: Number() also took "0x10" (16) and "1e4"; anything else stays text for the schema to refuse.
    else if (kind === "number") value = /^\s*-?[0-9]+(\.[0-9]+)?\s*$/.test(raw) ? Number(raw) : raw;
    else if (kind === "list") value = raw.split(",").map((x) => x.trim()).filter(Boolean);
    else if (kind === "json") {
      try {
        value = JSON.parse(raw);
      } catch (err) {
        throw new ConfigError(`${name}: not valid JSON (${(err as Error).message})`);
      }
    }
    if (typeof merged !== "object" || merged === null || Array.isArray(merged)) break; // the schema reports the bad root
    let obj = merged as Record<string, unknown>;
    for (const key of path.slice(0, -1)) {
      const next = obj[key];
      obj = obj[key] = typeof next === "object" && next !== null && !Array.isArray(next) ? (next as Record<string, unknown>) : {};
    }
    obj[path.at(-1)!] = value;
    fromEnv.set(path.join("."), name);
  }
  return { merged, fromEnv };
}

/** HOOKBOX_ variables that are not settings: the config file's path, log level, build and test knobs. */
const OTHER_ENV = new Set(["HOOKBOX_CONFIG", "HOOKBOX_LOG", "HOOKBOX_REQUIRE_TOOLCHAINS", "HOOKBOX_RUSTC", "HOOKBOX_CLANG", "HOOKBOX_WASI_SYSROOT", "HOOKBOX_TEST_DB", "HOOKBOX_SQLD", "HOOKBOX_SQLD_CACHE"]);

/** A warning per HOOKBOX_ variable that names no setting (a misspelt one would silently do nothing). */
function unknownEnv(env: Record<string, string | undefined>): string[] {
  const known = ENV_SETTINGS.map((s) => s.env);
  return Object.keys(env)
    .filter((name) => name.startsWith("HOOKBOX_") && !OTHER_ENV.has(name) && !known.includes(name))
    .map((name) => `${name} is not a hookbox setting and is ignored${suggest(name, known)}`);
}

/** Whether `input` (the file's settings) holds a value at the dotted `path`. */
function hasPath(input: unknown, path: string): boolean {
  let at: unknown = input;
  for (const key of path.split(".")) {
    if (typeof at !== "object" || at === null || !(key in at)) return false;
    at = (at as Record<string, unknown>)[key];
  }
  return true;
}

/** Parses config input (file contents or an object built by a test), with env overrides applied. */
export function parseConfig(input: unknown, env: Record<string, string | undefined> = {}, origin = "config"): Config {
  // Valibot takes an array for an object: a file holding [] would run on the defaults unnoticed.
  if (Array.isArray(input)) throw new ConfigError(`${origin}: (root): must be a JSON object, not an array`);
  // "$schema" (an editor's hint) is no setting, in a config file as in a manifest.
  if (typeof input === "object" && input !== null && "$schema" in input) input = Object.fromEntries(Object.entries(input).filter(([k]) => k !== "$schema"));
  const { merged, fromEnv } = applyEnv(input, env);
  /** The variable that set `path` or an object above it (HOOKBOX_PLUGINS_GRANTS for plugins.grants.x.0). */
  const setBy = (path: string): string | undefined => {
    for (let p = path; p !== ""; p = p.includes(".") ? p.slice(0, p.lastIndexOf(".")) : "") {
      const name = fromEnv.get(p);
      if (name) return name;
    }
    return undefined;
  };
  /**
   * setBy, and for a setting that is missing from an object only the environment made
   * (HOOKBOX_PROVIDER_TYPE=openai with no provider in the file: provider.base_url), the variables that made it.
   */
  const envFor = (path: string): string | undefined => {
    const name = setBy(path);
    if (name) return name;
    const parent = path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "";
    if (parent === "" || hasPath(input, parent)) return undefined;
    const makers = [...fromEnv].filter(([p]) => p.startsWith(`${parent}.`)).map(([, name]) => name);
    return makers.length > 0 ? makers.join(", ") : undefined;
  };
  // A provider given without a type is the default (local) one when every setting given is one of
  // its own (e.g. only HOOKBOX_PROVIDER_CONTEXT_WINDOW_TOKENS); otherwise the type must be said.
  const provider = (merged as { provider?: unknown } | null)?.provider;
  if (typeof provider === "object" && provider !== null && !Array.isArray(provider) && !("type" in provider)) {
    const others = Object.keys(provider).filter((k) => !LOCAL_PROVIDER_KEYS.includes(k));
    if (others.length > 0) {
      const name = (k: string) => fromEnv.get(`provider.${k}`) ?? `provider.${k}`;
      // Blamed on the file only when the file gave one of them.
      const where = others.every((k) => fromEnv.has(`provider.${k}`)) ? "environment" : origin;
      throw new ConfigError(`${where}: provider.type is missing: ${others.map(name).join(", ")} ${others.length > 1 ? "are settings" : "is a setting"} of the "openai" provider (set provider.type or HOOKBOX_PROVIDER_TYPE=openai)`);
    }
    (provider as Record<string, unknown>).type = "local";
  }
  // Keys valibot's record would drop unseen: refused, naming where.
  for (const map of ["grants", "limits", "command_users"]) {
    const m = (merged as { plugins?: Record<string, unknown> } | null)?.plugins?.[map];
    const bad = typeof m === "object" && m !== null ? Object.keys(m).find((k) => RESERVED_NAMES.has(k)) : undefined;
    if (bad !== undefined) throw new ConfigError(`${envFor(`plugins.${map}`) ? `environment: ${envFor(`plugins.${map}`)}` : origin}: plugins.${map}: "${bad}" cannot name a plugin or command (every JavaScript object has a member of that name)`);
  }
  const arrays = arraysForObjects(ConfigSchema, merged);
  if (arrays.length > 0) throw new ConfigError(arrays.map((path) => `${envFor(path) ? `environment: ${envFor(path)}` : origin}: ${path}: must be a JSON object, not an array`).join("; "));
  const res = v.safeParse(ConfigSchema, merged);
  if (!res.success) {
    const where = res.issues
      .map((i) => {
        const { path, message: said } = describeIssue(ConfigSchema, i);
        // A missing setting says how to give it (HOOKBOX_PROVIDER_TYPE=openai alone lacks two).
        const variable = said.startsWith("missing required field") ? ENV_SETTINGS.find((s) => s.path.join(".") === path)?.env : undefined;
        const message = variable ? `${said} (set ${variable}, or ${path} in the config file)` : said;
        // A value from the environment is named by its variable, not blamed on the file.
        const name = envFor(path);
        return name ? `environment: ${name} (${path}): ${message}` : `${origin}: ${path || "(root)"}: ${message}`;
      })
      .join("; ");
    throw new ConfigError(where);
  }
  // Each warning is logged with where its value came from: the environment or the file.
  const warnings = unknownEnv(env).map((text) => ({ text, fromEnv: true }));
  const { hook_callback_timeout, ...plugins } = res.output.plugins;
  const timeoutWarnings: string[] = [];
  const hookTimeoutSeconds = hookTimeout(hook_callback_timeout, timeoutWarnings);
  const timeoutVar = envFor("plugins.hook_callback_timeout");
  for (const w of timeoutWarnings) warnings.push(timeoutVar ? { text: `${timeoutVar}: ${w}`, fromEnv: true } : { text: w, fromEnv: false });
  const c: Config = { ...res.output, plugins: { ...plugins, hook_callback_timeout: hookTimeoutSeconds }, warnings: warnings.map((w) => w.text) };
  // Only a variable that set the setting: a default plugins.dir is not HOOKBOX_PLUGINS_ENABLED's.
  envOfConfig.set(c, setBy);
  for (const w of warnings) log("warn", w.text, { origin: w.fromEnv ? "environment" : origin });
  checkBindHost(c);
  return c;
}

/**
 * Plugin names in enabled, disabled, grants, limits and fail_closed must be plugins that exist in plugins.dir:
 * a typo would otherwise silently leave a plugin off or ungranted.
 */
export function checkPluginNames(c: Config, available: readonly string[], dirExists = true): void {
  const named: Array<[path: string, names: readonly string[]]> = [
    ["plugins.enabled", c.plugins.enabled],
    ["plugins.disabled", c.plugins.disabled],
    ["plugins.grants", Object.keys(c.plugins.grants)],
    ["plugins.limits", Object.keys(c.plugins.limits)],
    ["plugins.fail_closed", c.plugins.fail_closed],
  ];
  // One cause, said once (a missing folder gave one "no plugin named" per name, the cause only in a warning).
  if (!dirExists && named.some(([, names]) => names.length > 0)) {
    const where = named.filter(([, names]) => names.length > 0).map(([path]) => settingLabel(c, path));
    throw new ConfigError(`${settingLabel(c, "plugins.dir")}: ${c.plugins.dir} does not exist, and ${where.join(", ")} name plugins in it`);
  }
  const problems: string[] = [];
  for (const [path, names] of named) {
    for (const name of names) {
      if (!available.includes(name)) problems.push(`${settingLabel(c, path)}: no plugin named "${name}" in ${c.plugins.dir}${suggest(name, available)}`);
    }
  }
  if (problems.length) throw new ConfigError(problems.join("; "));
  // A fail-closed guard that exists but is not running blocks every tool call (turns/tool-step.ts):
  // said at start (one that does not exist was refused above, not warned about first).
  for (const name of c.plugins.fail_closed) {
    if (!c.plugins.enabled.includes(name) || c.plugins.disabled.includes(name)) {
      const warning = `${settingLabel(c, "plugins.fail_closed")}: ${name} is not enabled, so it blocks every tool call`;
      c.warnings.push(warning);
      log("warn", warning, {});
    }
  }
}

/**
 * plugins.command_users names commands: each must be one a plugin in plugins.dir declares, else a
 * typo would leave the command it meant open to every identified user.
 */
export function checkCommandUsers(c: Config, declared: { names: readonly string[]; unreadable: readonly string[] }): void {
  const { names, unreadable } = declared;
  const also = unreadable.length ? ` (unreadable manifest.json in: ${unreadable.join(", ")})` : "";
  const problems = Object.keys(c.plugins.command_users)
    .filter((name) => !names.includes(name))
    .map((name) => `plugins.command_users: no plugin in ${c.plugins.dir} declares a command "${name}"${suggest(name, names)}${also}`);
  if (problems.length) throw new ConfigError(problems.join("; "));
}

const SECRET_KEYS = new Set(["api_token", "db_auth_token", "api_key"]);

/** The effective configuration for printing: secrets (and credentials inside URLs) masked. */
export function maskSecrets(c: Config): unknown {
  const mask = (key: string, value: unknown): unknown => {
    if (typeof value === "string" && SECRET_KEYS.has(key)) return value === "" ? "" : "***";
    // Credentials inside a URL: user:password@ and token/key query parameters.
    if (typeof value === "string" && /^[a-z]+:\/\//i.test(value)) {
      return value.replace(/\/\/[^/@]*@/, "//***@").replace(/([?&](?:authToken|token|key|api_key)=)[^&]*/gi, "$1***");
    }
    return value;
  };
  return JSON.parse(JSON.stringify(c, mask));
}

export const DEFAULT_HOOK_TIMEOUT_SECONDS = 30;
export const MAX_HOOK_TIMEOUT_SECONDS = 600;

/**
 * plugins.hook_callback_timeout as the reference agent reads it: above 600 s is clamped to 600,
 * zero, negative or non-numeric values fall back to the default; each with a warning, never a
 * refusal to start (an operator's typo must not take the agent down).
 */
function hookTimeout(raw: unknown, warnings: string[]): number {
  if (raw === undefined) return DEFAULT_HOOK_TIMEOUT_SECONDS;
  const n = typeof raw === "number" ? raw : typeof raw === "string" && raw.trim() !== "" ? Number(raw) : NaN;
  if (!Number.isFinite(n) || n <= 0) {
    warnings.push(`plugins.hook_callback_timeout ${JSON.stringify(raw)} is not a positive number of seconds; using the default ${DEFAULT_HOOK_TIMEOUT_SECONDS}`);
    return DEFAULT_HOOK_TIMEOUT_SECONDS;
  }
  if (n > MAX_HOOK_TIMEOUT_SECONDS) {
    warnings.push(`plugins.hook_callback_timeout ${n} is above ${MAX_HOOK_TIMEOUT_SECONDS} s; clamped to ${MAX_HOOK_TIMEOUT_SECONDS}`);
    return MAX_HOOK_TIMEOUT_SECONDS;
  }
  return n;
}

/** Without a token the API must not be reachable from other machines (also for `serve --host`). */
export function checkBindHost(c: Pick<Config, "host" | "api_token">): void {
  if (!c.api_token && !isLoopback(c.host)) {
    throw new ConfigError(`host ${c.host}: binding beyond loopback needs HOOKBOX_API_TOKEN`);
  }
}

/** Loopback literals only: a DNS name such as "127.0.0.1.nip.io" may resolve to a public interface. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** Loads the operator's config: HOOKBOX_CONFIG or ./hookbox.config.json if present, then env. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // An empty HOOKBOX_CONFIG is unset, as for every other variable.
  const path = env.HOOKBOX_CONFIG || (existsSync("hookbox.config.json") ? "hookbox.config.json" : undefined);
  if (path === undefined) return parseConfig({}, env);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const missing = (err as { code?: string }).code === "ENOENT";
    const named = env.HOOKBOX_CONFIG ? `HOOKBOX_CONFIG names ${path}` : path;
    throw new ConfigError(missing ? `${named}, which does not exist` : `${named}, which cannot be read: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
  return parseConfig(raw, env, path);
}
