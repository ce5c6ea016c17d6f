// manifest.json of a plugin (see plugins-wasm/README.md), validated with valibot: the plugin's own
// claims (hooks, commands, requested capabilities, limits). Nothing in it grants anything.
import * as v from "valibot";
import { isHookName, type HookName } from "../../hooks/catalogue.ts";
import { CAPABILITY_PATTERN } from "../../host-api/capabilities.ts";
import { PluginLimitsSchema, PluginName } from "../config.ts";

const HookSchema = v.custom<HookName>((x) => typeof x === "string" && isHookName(x), "unknown hook");

export const ManifestSchema = v.object({
  name: PluginName,
  version: v.pipe(v.string(), v.minLength(1), v.maxLength(64)),
  description: v.optional(v.pipe(v.string(), v.maxLength(500))),
  hooks: v.optional(v.pipe(v.array(HookSchema), v.maxLength(64)), []),
  commands: v.optional(
    v.array(
      v.object({
        name: v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "command names are lowercase [a-z0-9_-]")),
        description: v.optional(v.pipe(v.string(), v.maxLength(500)), ""),
        sensitive: v.optional(v.boolean(), false),
      }),
    ),
    [],
  ),
  capabilities: v.optional(v.array(v.pipe(v.string(), v.regex(CAPABILITY_PATTERN, 'capabilities are "kv", "sessions:read" or "http:<host>"'))), []),
  limits: v.optional(PluginLimitsSchema, {}),
});
export type Manifest = v.InferOutput<typeof ManifestSchema>;

export class ManifestError extends Error {
  override name = "ManifestError";
}

export function parseManifest(raw: unknown, where: string): Manifest {
  const res = v.safeParse(ManifestSchema, raw);
  if (!res.success) {
    const issues = res.issues.map((i) => `${v.getDotPath(i) ?? "(root)"}: ${i.message}`).join("; ");
    throw new ManifestError(`${where}: ${issues}`);
  }
  return res.output;
}
