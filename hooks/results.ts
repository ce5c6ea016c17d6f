// What the core reads from a plugin's output, per hook. Only hooks whose return is used
// (RETURNS_USED: pre_llm_call, pre_tool_call, the transforms) are parsed at all; an observer's
// output is ignored whatever it is (text, nothing, malformed JSON) and is never a failure.
import * as v from "valibot";
import { PluginCallError } from "./failures.ts";
import { PreLlmResultSchema, RETURNS_USED, ToolDirectiveSchema, TransformLlmOutputSchema, TransformToolResultSchema, type HookName } from "./catalogue.ts";

const RESULT_SCHEMAS: Partial<Record<HookName, v.GenericSchema>> = {
  pre_llm_call: PreLlmResultSchema,
  pre_tool_call: ToolDirectiveSchema,
  transform_tool_result: TransformToolResultSchema,
  transform_llm_output: TransformLlmOutputSchema,
};

const EXPECTED: Partial<Record<HookName, string>> = {
  pre_llm_call: 'a string or {"context": string}',
  pre_tool_call: '{"action":"block","message"} or {"action":"modify","args":{...}}',
  transform_tool_result: 'a string or {"result": string}',
  transform_llm_output: 'a string or {"response": string}',
};

export type HookResult = { ok: true; value: unknown } | { ok: false; problem: string };

/** True when `hook`'s output is read at all. */
export const readsOutput = (hook: HookName): boolean => RETURNS_USED.has(hook);

/** Checks already-parsed JSON against what `hook` may return. */
export function checkHookResult(hook: HookName, parsed: unknown): HookResult {
  const schema = RESULT_SCHEMAS[hook];
  if (!schema) return { ok: true, value: null };
  const res = v.safeParse(schema, parsed);
  if (res.success) return { ok: true, value: res.output };
  // The right shape with a value past a limit says which limit; any other miss, the shapes expected.
  const limit = firstCheck(res.issues);
  return { ok: false, problem: limit ? `${hook} output: ${limit}` : `${hook} output must be ${EXPECTED[hook]}` };
}

/** The message of the first failed v.check among `issues` and the issues nested in them (a union's options). */
function firstCheck(issues: readonly v.BaseIssue<unknown>[] | undefined): string | undefined {
  for (const issue of issues ?? []) {
    if (issue.type === "check") return issue.message;
    const nested = firstCheck(issue.issues);
    if (nested) return nested;
  }
  return undefined;
}

/** What the core took from one plugin's output: the parsed result, and pre_llm_call's context. */
export interface HookOutput {
  value: unknown;
  context: string | undefined;
}

export interface OutputLimits {
  /** Largest output, UTF-8 bytes. */
  maxOutputBytes?: number | undefined;
  /** Most characters of context one pre_llm_call may inject. */
  maxInjectedChars?: number | undefined;
}

/**
 * Reads a plugin's output for `hook`. An observer's output is ignored, whatever it is. For a hook
 * whose return is used: empty is "nothing"; otherwise it must be JSON of that hook's result shape
 * (hooks/results.ts), else bad_output. A JSON null is "nothing" too.
 */
export function readHookOutput(hook: HookName, output: string | undefined, limits: OutputLimits = {}): HookOutput | undefined {
  if (!readsOutput(hook) || output === undefined || output.length === 0) return undefined;
  const { maxOutputBytes = Number.MAX_SAFE_INTEGER, maxInjectedChars = Number.MAX_SAFE_INTEGER } = limits;
  // UTF-8 length is at most 3 bytes per UTF-16 unit; count exactly only near the limit.
  if (output.length * 3 > maxOutputBytes && Buffer.byteLength(output) > maxOutputBytes) {
    throw new PluginCallError("bad_output", `output of ${Buffer.byteLength(output)} bytes exceeds ${maxOutputBytes}`);
  }
  if (nestsTooDeep(output)) {
    throw new PluginCallError("bad_output", `output nests deeper than ${MAX_OUTPUT_DEPTH} levels`);
  }
  let parsed: unknown;
  try {
    // A \uD800-\uDFFF escape may decode to a lone surrogate: stored, it becomes U+FFFD, so it is one
    // here already, and the reply says what the history keeps.
    parsed = SURROGATE_ESCAPE.test(output) ? JSON.parse(output, (_key, value: unknown) => (typeof value === "string" ? value.toWellFormed() : value)) : JSON.parse(output);
  } catch {
    throw new PluginCallError("bad_output", `output is not JSON: ${JSON.stringify(output.slice(0, 80))}`);
  }
  const res = checkHookResult(hook, parsed);
  if (!res.ok) throw new PluginCallError("bad_output", res.problem);
  if (res.value === null) return undefined;
  if (hook !== "pre_llm_call") return { value: res.value, context: undefined };
  const ctx = typeof res.value === "string" ? res.value : (res.value as { context: string }).context;
  if (ctx.length > maxInjectedChars) {
    throw new PluginCallError("bad_output", `injected ${ctx.length} characters of context, over the limit of ${maxInjectedChars} (plugins.max_injected_chars)`);
  }
  return ctx.trim().length > 0 ? { value: res.value, context: ctx } : undefined;
}

// Only a \uD800-\uDFFF escape makes JSON text decode to a lone surrogate: the reviver runs only then.
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * Deepest nesting of arrays and objects a plugin's output may have. JSON.parse takes far deeper, but
 * what the host then does with the value (validate it, store it, send it on as a tool call's
 * arguments) recurses too: 20,000 levels in a 40 KB `modify` overflowed the stack there, failing
 * every turn with that tool as a server error while the plugin counted as ok.
 */
export const MAX_OUTPUT_DEPTH = 64;

/** Whether a plugin's JSON output nests deeper than MAX_OUTPUT_DEPTH (the host would recurse that deep). */
export function nestsTooDeep(output: string): boolean {
  // Text shorter than two characters per level cannot nest past the limit: most outputs skip the scan.
  return output.length > 2 * MAX_OUTPUT_DEPTH && nestedDeeper(output, MAX_OUTPUT_DEPTH);
}

/** Whether JSON `text` opens more than `max` arrays/objects at once (brackets in strings do not count). */
function nestedDeeper(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}
