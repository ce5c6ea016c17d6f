// A plugin call that must fail: resolves with its PluginCallError (the test then checks its kind).
import assert from "node:assert/strict";
import { PluginCallError } from "../../hooks/failures.ts";

export async function callFailure(p: Promise<unknown>): Promise<PluginCallError> {
  const err = await p.then(
    () => assert.fail("call should have failed"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof PluginCallError, `expected PluginCallError, got ${String(err)}`);
  return err;
}
