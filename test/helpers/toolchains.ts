// The Rust and C plugin toolchains are optional on a developer's machine (build.mjs skips those
// plugins) but required in CI (.ci/run installs them and sets HOOKBOX_REQUIRE_TOOLCHAINS).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const BUILD_SCRIPT = fileURLToPath(new URL("../../plugins-wasm/build.mjs", import.meta.url));

export function toolchainsRequired(): boolean {
  return process.env.HOOKBOX_REQUIRE_TOOLCHAINS === "1";
}

/** Why a built example plugin is absent (undefined when it is there, or when CI requires it). */
export function skipUnlessBuilt(wasmPath: string): string | undefined {
  if (existsSync(wasmPath) || toolchainsRequired()) return undefined;
  return `${wasmPath} not built (toolchain missing; see plugins-wasm/README.md)`;
}
