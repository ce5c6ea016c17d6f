// One plugin folder as the runtime tracks it: what its files said, what the operator decided, and
// its running instance when active. Shared by the manager and its helpers (status, command bridge).
import type { Grants } from "../../host-api/capabilities.ts";
import type { PluginKv } from "../../host-api/kv.ts";
import type { SandboxLimits, WasmPlugin } from "../sandbox/wasm-plugin.ts";
import type { Manifest } from "./manifest.ts";

export interface PluginEntry {
  name: string;
  path: string;
  manifest: Manifest | undefined;
  grants: Grants;
  limits: SandboxLimits | undefined;
  /** Load error: the plugin is "failed". */
  error: string | null;
  /** Operator override from plugin_state: true/false, or null for "as configured". */
  override: boolean | null;
  sandbox: WasmPlugin | undefined;
  kv: PluginKv | undefined;
}
