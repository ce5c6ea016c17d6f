// Operator configuration: a JSON file (HOOKBOX_CONFIG, else ./hookbox.config.json when present)
// overlaid by environment variables. Validated with valibot; a bad file stops start-up with the
// exact field at fault. Capabilities are granted here and nowhere else.
import { existsSync, readFileSync } from "node:fs";
import * as v from "valibot";

const Seconds = v.pipe(v.number(), v.minValue(0.001), v.maxValue(86_400));
/** A plugin's name (its folder, manifest name, config key and URL segment). */
export const PluginName = v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "plugin names are lowercase [a-z0-9_-], at most 64 chars"));

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
  db_url: v.optional(v.string(), "file:./data/hookbox.db"),
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
  api_token: v.optional(v.string()),
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
      /** `prune` deletes sessions not updated for this many days. */
      prune_after_days: v.optional(v.pipe(v.number(), v.minValue(0)), 30),
      /** Idle sessions are archived (silently) after this many days; 0 turns it off. */
      idle_archive_after_days: v.optional(v.pipe(v.number(), v.minValue(0)), 0),
    }),
    {},
  ),
  plugins: v.optional(
    v.strictObject({
      dir: v.optional(v.string(), "./plugins-wasm"),
      enabled: v.optional(v.array(PluginName), []),
      disabled: v.optional(v.array(PluginName), []),
      /** Capability grants per plugin: "kv", "sessions:read", "http:<host>". */
      grants: v.optional(v.record(PluginName, v.array(v.string())), {}),
      hook_callback_timeout: v.optional(Seconds, 30),
      cooloff_seconds: v.optional(v.pipe(v.number(), v.minValue(0)), 60),
      quarantine_after: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 5),
      limits: v.optional(v.record(PluginName, PluginLimitsSchema), {}),
      /** Sensitive slash commands limited to these user_ids, per command name. */
      command_users: v.optional(v.record(v.string(), v.array(v.string())), {}),
    }),
    {},
  ),
});
export type Config = v.InferOutput<typeof ConfigSchema>;
export type ConfigInput = v.InferInput<typeof ConfigSchema>;

export class ConfigError extends Error {
  override name = "ConfigError";
}

const list = (s: string) => s.split(",").map((x) => x.trim()).filter(Boolean);

/** Parses config input (file contents or an object built by a test), with env overrides applied. */
export function parseConfig(input: unknown, env: Record<string, string | undefined> = {}, origin = "config"): Config {
  const res = v.safeParse(ConfigSchema, input ?? {});
  if (!res.success) {
    const where = res.issues.map((i) => `${v.getDotPath(i) ?? "(root)"}: ${i.message}`).join("; ");
    throw new ConfigError(`${origin}: ${where}`);
  }
  const c = res.output;
  if (env.HOOKBOX_DB_URL) c.db_url = env.HOOKBOX_DB_URL;
  if (env.HOOKBOX_DB_AUTH_TOKEN) c.db_auth_token = env.HOOKBOX_DB_AUTH_TOKEN;
  if (env.HOOKBOX_DB_SYNCHRONOUS) {
    const sync = env.HOOKBOX_DB_SYNCHRONOUS.toLowerCase();
    if (sync !== "full" && sync !== "normal") throw new ConfigError(`HOOKBOX_DB_SYNCHRONOUS: full or normal, not ${env.HOOKBOX_DB_SYNCHRONOUS}`);
    c.db_synchronous = sync;
  }
  if (env.HOOKBOX_API_TOKEN) c.api_token = env.HOOKBOX_API_TOKEN;
  if (env.HOOKBOX_SESSIONS_DIR) c.sessions_dir = env.HOOKBOX_SESSIONS_DIR;
  if (env.HOOKBOX_HOST) c.host = env.HOOKBOX_HOST;
  if (env.HOOKBOX_PORT) {
    const port = Number(env.HOOKBOX_PORT);
    if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new ConfigError(`HOOKBOX_PORT: not a port: ${env.HOOKBOX_PORT}`);
    c.port = port;
  }
  if (env.HOOKBOX_PLUGINS_DIR) c.plugins.dir = env.HOOKBOX_PLUGINS_DIR;
  if (env.HOOKBOX_PLUGINS_ENABLED !== undefined) c.plugins.enabled = list(env.HOOKBOX_PLUGINS_ENABLED);
  if (env.HOOKBOX_PLUGINS_DISABLED !== undefined) c.plugins.disabled = list(env.HOOKBOX_PLUGINS_DISABLED);
  checkBindHost(c);
  return c;
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
  const path = env.HOOKBOX_CONFIG ?? (existsSync("hookbox.config.json") ? "hookbox.config.json" : undefined);
  if (path === undefined) return parseConfig({}, env);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new ConfigError(`${path}: ${(err as Error).message}`);
  }
  return parseConfig(raw, env, path);
}
