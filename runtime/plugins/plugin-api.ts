// What a plugin's manifest adds beyond hooks and commands: its tools (each a Tool in the core's
// registry that calls the plugin's `tool_<name>` export in its sandbox) and its durable
// system-prompt section (the manifest's `system_prompt`, plus what it keeps in its own KV under
// SYSTEM_PROMPT_KEY, plugin-wide or for a session: set with the kv host function).
import { log } from "../log.ts";
import type { Tool } from "../tools/registry.ts";
import { commandOutput } from "./command-output.ts";
import { MAX_SYSTEM_PROMPT_BYTES, type Manifest } from "./manifest.ts";

/** The KV key (plugin-wide "" scope or a session's) of a plugin's set system-prompt section. */
export const SYSTEM_PROMPT_KEY = "hookbox.system_prompt";

export function pluginTools(plugin: string, manifest: Manifest, call: (tool: string, input: string) => Promise<string | undefined>): Tool[] {
  return manifest.tools.map((t) => ({
    spec: { name: t.name, description: t.description, parameters: t.parameters },
    plugin,
    // Output as for commands: a JSON string is the text, {"text"} its text, other JSON compact.
    run: async (args, ctx) => commandOutput(await call(t.name, JSON.stringify({ args, ...ctx }))),
  }));
}

const encoder = new TextEncoder();
const warned = new Set<string>();

/**
 * The plugin's section for a session: the manifest's text, then the plugin-wide KV text, then the
 * session's own (the nearest in its compaction chain), joined; capped at MAX_SYSTEM_PROMPT_BYTES.
 */
export function sectionOf(plugin: string, manifest: Manifest, stored: (scope: string) => string | undefined, sessionIds: readonly string[]): string | undefined {
  const parts: string[] = [];
  if (manifest.system_prompt) parts.push(manifest.system_prompt);
  const global = stored("");
  if (global) parts.push(global);
  for (const id of sessionIds) {
    const own = stored(id);
    if (own) {
      parts.push(own);
      break;
    }
  }
  const text = parts.join("\n\n").trim();
  if (text === "") return undefined;
  return cap(plugin, text);
}

function cap(plugin: string, text: string): string {
  const bytes = encoder.encode(text);
  if (bytes.length <= MAX_SYSTEM_PROMPT_BYTES) return text;
  if (!warned.has(plugin)) {
    warned.add(plugin);
    log("warn", "plugin system-prompt section cut to the cap", { plugin, bytes: bytes.length, cap: MAX_SYSTEM_PROMPT_BYTES });
  }
  let end = MAX_SYSTEM_PROMPT_BYTES;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return new TextDecoder().decode(bytes.subarray(0, end));
}
