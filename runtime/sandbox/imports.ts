// What a plugin module may import, and where each import is served: the sandbox's own functions
// (beside host-api's), the part of Extism's kernel hookbox serves, and WASI under its own name.
import { KERNEL_MODULE } from "./instrument.ts";

export const HOST_MODULE = "extism:host/user";
/**
 * Where a module's "wasi_snapshot_preview1" imports are served (renamed at load: Extism refuses that
 * module name unless its own node:wasi-based WASI is on). host-api/wasi.ts is capability-free.
 */
export const WASI_SANDBOX_MODULE = "hookbox:wasi";

/**
 * Host functions the sandbox itself provides (beside host-api's): `hookbox_input_read(dest, len)`
 * copies the call's whole input into the plugin's linear memory at `dest` and returns `len`, or 0
 * when it cannot (bad range): the plugin then falls back to the kernel's input_load_u64.
 * plugins-wasm/lib's beginCall() calls it first thing, so a library plugin's export that never calls
 * it forgot beginCall(). `hookbox_abort(message)` ends the call as a trap carrying the message
 * (lib's abort handler: `throw new Error("x")` arrives as "abort: x at file:line:col").
 * `hookbox_block_write(block, src, len)` fills a whole block (`len` bytes, allocated by the plugin
 * through the metered alloc) from linear memory at `src` in one copy; `hookbox_block_read(block,
 * dest, len)` copies a whole block to linear memory. Both return `len`, or 0 when they cannot
 * (bad range): the plugin then uses the kernel's store_u64/load_u64, a host call per
 * 8 bytes (30,000 for a 10,000-id list). `hookbox_output_write(src, len)` makes `len` bytes of linear
 * memory at `src` the call's output (it takes precedence over output_set's) and returns `len`, or 0
 * when it cannot (bad range, more than max_output_bytes): the plugin then sets it
 * through the kernel (alloc, copy, output_set), which also clears what an earlier
 * hookbox_output_write set. One copy, no block: the kernel's way costs a host block and the SDK's
 * output wrapper (about 1 us a call). All four need the instance's memory: for a worker instance
 * the worker serves them (call-io.ts, block-copy.ts), without a crossing.
 */
export const SANDBOX_FUNCTION_NAMES = ["hookbox_input_read", "hookbox_abort", "hookbox_block_read", "hookbox_block_write", "hookbox_output_write"] as const;

/**
 * Kernel functions a module may import. Not vars (var_get/var_set: host memory that outlives calls,
 * keys uncounted), config_get (hookbox has no Extism config), nor http_* (would bypass the
 * http:<host> grants: plugins use hookbox_http).
 */
export const KERNEL_FUNCTION_NAMES: ReadonlySet<string> = new Set([
  "alloc", "free", "length", "length_unsafe", "load_u8", "load_u64", "store_u8", "store_u64",
  "input_offset", "input_length", "input_load_u8", "input_load_u64", "output_set", "error_set", "error_get",
  "log_trace", "log_debug", "log_info", "log_warn", "log_error", "get_log_level",
]);

/** Why the module may not run here (an Extism kernel import hookbox does not serve), or undefined. */
export function refusedImport(module: WebAssembly.Module): string | undefined {
  const bad = WebAssembly.Module.imports(module).find((i) => i.module === KERNEL_MODULE && !KERNEL_FUNCTION_NAMES.has(i.name));
  if (!bad) return undefined;
  const why = bad.name.startsWith("http_") ? "use hookbox_http (granted http:<host>)" : bad.name.startsWith("var_") ? "keep state with hookbox_kv_*" : "not served by hookbox";
  return `imports unknown host function "${KERNEL_MODULE}" "${bad.name}" (an Extism kernel function hookbox does not serve: ${why})`;
}
