// The one way to build a running plugin: its KV namespace, its host API bound to its grants, and
// its sandbox over the compiled module. Used by the plugin manager, the tests and the bench alike.
import { PluginCallError } from "../../hooks/failures.ts";
import type { Grants } from "../../host-api/capabilities.ts";
import { bindHostApi, type HostContext } from "../../host-api/functions.ts";
import { PluginKv, type KvBackend, type KvQuota } from "../../host-api/kv.ts";
import { log } from "../log.ts";
import { HOST_MODULE } from "../sandbox/imports.ts";
import { CAN_SUSPEND, WasmPlugin, type SandboxLimits } from "../sandbox/wasm-plugin.ts";
import { compilePlugin } from "./loader.ts";
import type { Manifest } from "./manifest.ts";

export interface PluginSpec {
  name: string;
  /** The plugin's folder (plugin.wasm inside). */
  path: string;
  manifest: Manifest;
  limits: SandboxLimits;
  grants: Grants;
}

export interface InstanceServices {
  /** Where KV lives (the core's KvStore). */
  kv: KvBackend;
  quota: KvQuota;
  /** sessions:read; absent: such reads fail. */
  readMessages?: HostContext["readMessages"];
  logs?: HostContext["logs"];
  /** What hookbox_http never reaches (the database server, when it is one). */
  reservedEndpoints?: HostContext["reservedEndpoints"];
}

export interface PluginInstance {
  readonly name: string;
  readonly sandbox: WasmPlugin;
  readonly kv: PluginKv;
}

export const DEFAULT_KV_QUOTA: KvQuota = { keys: 100_000, bytes: 64 * 1024 * 1024 };

/** Compiles (or takes from the module cache) and instruments the module; the sandbox starts lazily. */
export async function createPluginInstance(spec: PluginSpec, services: InstanceServices): Promise<PluginInstance> {
  const kv = new PluginKv(spec.name, services.kv, services.quota);
  const host = bindHostApi({
    plugin: spec.name,
    grants: spec.grants,
    kv,
    readMessages:
      services.readMessages ??
      (() => {
        throw new PluginCallError("unavailable", "sessions:read is not available here");
      }),
    maxAnswerBytes: spec.limits.memoryPages * 65_536,
    log,
    ...(services.logs ? { logs: services.logs } : {}),
    ...(services.reservedEndpoints ? { reservedEndpoints: services.reservedEndpoints } : {}),
  });
  // Where the runtime cannot suspend a WASM call (no JSPI), a plugin granted async host functions
  // (http:) runs in a worker thread until its module is made rewindable (sandbox/rewind.ts), in
  // the background: an outside probe's module of 219 KB kept Binaryen busy past a minute, and the
  // server did not listen until every plugin had loaded. Then its calls run in-thread.
  const rewind = !CAN_SUSPEND && host.asyncFunctions && host.asyncFunctions.size > 0 ? [...host.asyncFunctions].map((name) => `${HOST_MODULE}.${name}`) : undefined;
  const { module, makeRewindable } = await compilePlugin(spec.path, spec.manifest, spec.limits, rewind);
  const sandbox = new WasmPlugin({ name: spec.name, module, limits: spec.limits, host });
  makeRewindable?.().then(
    (rewindable) => sandbox.useRewindable(rewindable),
    (err: Error) => log("warn", "plugin's module could not be made rewindable: its calls run in a worker thread", { plugin: spec.name, why: err.message }),
  );
  return { name: spec.name, sandbox, kv };
}
