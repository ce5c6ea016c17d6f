// Plugin errors name their cause: a misspelt hook or capability in a manifest gets a suggestion.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseManifest } from "../runtime/plugins/manifest.ts";

describe("plugin errors name their cause", () => {
  it("a misspelt hook or capability in manifest.json says which and suggests the right one", () => {
    assert.throws(
      () => parseManifest({ name: "x", version: "1", hooks: ["pre_llm_cal"], capabilities: ["KV", "sessions:reed"] }, "manifest.json"),
      (err: Error) => {
        assert.match(err.message, /hooks\.0: unknown hook "pre_llm_cal" \(did you mean pre_llm_call\?\)/);
        assert.match(err.message, /capabilities\.0: unknown capability "KV" \(did you mean kv\?\)/);
        assert.match(err.message, /capabilities\.1: unknown capability "sessions:reed" \(did you mean sessions:read\?\)/);
        return true;
      },
    );
  });
});
