// manifest.json of a plugin (see plugins-wasm/README.md), validated with valibot: the plugin's own
// claims (hooks, commands, tools, a system-prompt section, requested capabilities, limits). Nothing
// in it grants anything. A hook this host does not know is set aside with a warning (a plugin
// written for a newer host still runs its other hooks here).
import * as v from "valibot";
import { isHookName, type HookName } from "../../hooks/catalogue.ts";
import { wholeRecord } from "../../hooks/whole-record.ts";
import { schemaProblem } from "../tools/registry.ts";
import { Capability, notReserved, PluginLimitsSchema, PluginName } from "../config.ts";
import { arraysForObjects, describeIssue } from "../util/schema-walk.ts";
import { suggest } from "../util/suggest.ts";

const HookSchema = v.pipe(v.string(), v.regex(/^[a-z][a-z0-9_]{0,63}$/, "hook names are lowercase [a-z0-9_]"));

/** Largest durable system-prompt section of one plugin, bytes (manifest or host function). */
export const MAX_SYSTEM_PROMPT_BYTES = 4096;

// Entries are strict: a misspelt key fails the load with a suggestion ("sensitiv" silently left a
// sensitive command open to everyone: an outside probe).
const ToolSchema = v.strictObject({
  // Tool names follow the OpenAI function-name rule, so any provider accepts them.
  name: v.pipe(v.string(), v.regex(/^[a-z][a-z0-9_]{0,63}$/, "tool names are lowercase [a-z0-9_], at most 64 chars"), notReserved("tool")),
  description: v.pipe(v.string(), v.minLength(1), v.maxLength(1000)),
  parameters: v.pipe(
    wholeRecord(v.string(), v.unknown()),
    v.rawCheck(({ dataset, addIssue }) => {
      const problem = dataset.typed ? schemaProblem(dataset.value) : null;
      if (problem) addIssue({ message: `not a usable JSON Schema: ${problem}` });
    }),
  ),
});

/**
 * `$schema` and `x-...` keys annotate a manifest (editors, other tools): not hookbox's to check, at
 * the top level nor in a command or tool entry.
 */
function withoutAnnotations(raw: unknown): unknown {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return raw;
  const own = (o: object) => Object.entries(o).filter(([k]) => k !== "$schema" && !k.startsWith("x-"));
  const entries = (list: unknown) => (Array.isArray(list) ? list.map((e) => (typeof e === "object" && e !== null && !Array.isArray(e) ? Object.fromEntries(own(e)) : e)) : list);
  return Object.fromEntries(own(raw).map(([k, value]) => [k, k === "commands" || k === "tools" ? entries(value) : value]));
}

export const ManifestSchema = v.object({
  name: PluginName,
  version: v.pipe(v.string(), v.minLength(1), v.maxLength(64)),
  description: v.optional(v.pipe(v.string(), v.maxLength(500))),
  hooks: v.optional(v.pipe(v.array(HookSchema), v.maxLength(64)), []),
  commands: v.optional(
    v.array(
      v.strictObject({
        name: v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "command names are lowercase [a-z0-9_-]"), notReserved("command")),
        description: v.optional(v.pipe(v.string(), v.maxLength(500)), ""),
        sensitive: v.optional(v.boolean(), false),
      }),
    ),
    [],
  ),
  capabilities: v.optional(v.array(Capability), []),
  limits: v.optional(PluginLimitsSchema, {}),
  tools: v.optional(v.pipe(v.array(ToolSchema), v.maxLength(32)), []),
  system_prompt: v.optional(v.pipe(v.string(), v.maxBytes(MAX_SYSTEM_PROMPT_BYTES))),
});
type ParsedManifest = v.InferOutput<typeof ManifestSchema>;
export type Manifest = Omit<ParsedManifest, "hooks"> & {
  /** The hooks this host knows, in manifest order. */
  hooks: HookName[];
  /** Hooks the manifest names that this host does not know: not subscribed, shown with a warning. */
  unknown_hooks: string[];
  /**
   * Top-level keys this host does not know, each with a suggestion when it looks like a typo
   * (`capabilites (did you mean capabilities?)`): ignored, shown with a warning like unknown hooks
   * (a newer manifest still loads; a misspelt key does not go unnoticed).
   */
  unknown_fields: string[];
};

export class ManifestError extends Error {
  override name = "ManifestError";
}

export function parseManifest(raw: unknown, where: string): Manifest {
  const fields = withoutAnnotations(raw);
  const arrays = arraysForObjects(ManifestSchema, fields);
  if (arrays.length > 0) throw new ManifestError(`${where}: ${arrays.map((path) => `${path}: must be a JSON object, not an array`).join("; ")}`);
  const res = v.safeParse(ManifestSchema, fields);
  if (!res.success) {
    const issues = res.issues
      .map((i) => {
        const { path, message } = describeIssue(ManifestSchema, i);
        return `${path || "(root)"}: ${message}`;
      })
      .join("; ");
    throw new ManifestError(`${where}: ${issues}`);
  }
  const known = res.output.hooks.filter(isHookName);
  const unknown = res.output.hooks.filter((h) => !isHookName(h));
  // A name declared twice would claim its command (or tool) against itself and run for neither.
  for (const [field, names] of [
    ["tools", res.output.tools.map((t) => t.name)],
    ["commands", res.output.commands.map((c) => c.name)],
    ["hooks", res.output.hooks],
  ] as const) {
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined) throw new ManifestError(`${where}: ${field}: "${twice}" is declared twice`);
  }
  const allowed = Object.keys(ManifestSchema.entries);
  const extra = Object.keys(fields as object).filter((k) => !allowed.includes(k));
  return { ...res.output, hooks: known, unknown_hooks: unknown, unknown_fields: extra.map((k) => `${k}${suggest(k, allowed)}`) };
}
