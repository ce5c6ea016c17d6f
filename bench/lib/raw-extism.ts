// The outside floor of a WASM fan-out: the same plugin module called through Extism directly,
// in-thread, with no hookbox around it (no fuel instrumentation, no dispatcher, no limits, no stats):
// the input is encoded once and copied into each instance by the one host call the plugin makes for
// it; the KV host functions answer "absent". What hookbox adds on top is its own per-call cost.
import { readFileSync } from "node:fs";
import createPlugin, { type CallContext, type Plugin } from "@extism/extism";
import { blockCopyFunctions } from "../../runtime/sandbox/block-copy.ts";

export interface RawFleet {
  /** Calls `fn` on every instance, one after another, with the same input. */
  emit(fn: string, payload: unknown): Promise<void>;
  close(): Promise<void>;
}

export async function openRawFleet(wasmPath: string, count: number): Promise<RawFleet> {
  const module = new WebAssembly.Module(readFileSync(wasmPath));
  const plugins: Plugin[] = [];
  let input = new Uint8Array(0);
  for (let i = 0; i < count; i++) {
    let memory: WebAssembly.Memory | undefined;
    const plugin = await createPlugin(
      { wasm: [{ module }] },
      {
        useWasi: false,
        functions: {
          "extism:host/user": {
            hookbox_input_read: (_ctx: CallContext, dest: bigint, len: bigint) => {
              new Uint8Array(memory!.buffer, Number(dest), Number(len)).set(input);
              return len;
            },
            ...blockCopyFunctions(() => memory),
            hookbox_output_write: () => 0n, // the plugin then sets its output through the kernel
            hookbox_kv_get: () => 0n,
            hookbox_kv_set: () => undefined,
            hookbox_kv_delete: () => undefined,
            hookbox_abort: () => {
              throw new Error("plugin aborted");
            },
          },
        },
      },
    );
    memory = (await plugin.getInstance()).exports.memory as WebAssembly.Memory;
    plugins.push(plugin);
  }
  const encoder = new TextEncoder();
  return {
    async emit(fn, payload) {
      input = encoder.encode(JSON.stringify(payload));
      for (const p of plugins) await p.call(fn, input);
    },
    async close() {
      for (const p of plugins) await p.close();
    },
  };
}
