// What the core reads from a plugin's output, per hook. Only hooks whose return is used
// (RETURNS_USED: pre_llm_call, pre_tool_call, the transforms) are parsed at all; an observer's
// output is ignored whatever it is (text, nothing, malformed JSON) and is never a failure.
import * as v from "valibot";
import { PreLlmResultSchema, RETURNS_USED, ToolDirectiveSchema, TransformResultSchema, type HookName } from "./catalogue.ts";

const RESULT_SCHEMAS: Partial<Record<HookName, v.GenericSchema>> = {
  pre_llm_call: PreLlmResultSchema,
  pre_tool_call: ToolDirectiveSchema,
  transform_tool_result: TransformResultSchema,
  transform_llm_output: TransformResultSchema,
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
  return res.success ? { ok: true, value: res.output } : { ok: false, problem: `${hook} output must be ${EXPECTED[hook]}` };
}
