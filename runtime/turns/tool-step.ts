// One tool call of a turn, built-in or plugin tool alike:
//   pre_tool_call -> arguments checked against the tool's JSON Schema -> the tool runs (a plugin
//   tool in its sandbox) -> result size-capped -> post_tool_call.
// A tool that fails or is unknown gives the model an "error: ..." result; the turn goes on.
import type { HookDispatcher } from "../../hooks/dispatcher.ts";
import type { ToolStatus } from "../../hooks/catalogue.ts";
import type { ToolCallContext, ToolRegistry } from "../tools/registry.ts";
import { capResult } from "../tools/cap.ts";
import type { ToolRun } from "./events.ts";

export interface ToolStepDeps {
  dispatcher: HookDispatcher;
  tools: ToolRegistry;
  /** Largest result the model sees (plugins.tool_result_max_bytes). */
  maxResultBytes: number;
}

export interface ToolCallRequest extends ToolCallContext {
  tool_name: string;
  args: Record<string, unknown>;
}

export async function runToolCall(deps: ToolStepDeps, req: ToolCallRequest): Promise<ToolRun> {
  await deps.dispatcher.emit("pre_tool_call", req);
  const t0 = performance.now();
  const { status, error, result } = await execute(deps, req, req.args);
  const duration_ms = performance.now() - t0;
  const fields = { ...req, result, duration_ms, status, error };
  await deps.dispatcher.emit("post_tool_call", fields);
  const tool = deps.tools.get(req.tool_name);
  return { ...fields, plugin: tool?.plugin ?? null, directives: [], transformed_by: null };
}

async function execute(
  deps: ToolStepDeps,
  call: ToolCallContext & { tool_name: string },
  args: Record<string, unknown>,
): Promise<{ status: ToolStatus; error: string | null; result: string }> {
  const failed = (error: string) => ({ status: "error" as const, error, result: `error: ${error}` });
  const tool = deps.tools.get(call.tool_name);
  if (!tool) return failed(`unknown tool ${call.tool_name}`);
  const invalid = deps.tools.check(call.tool_name, args);
  if (invalid) return failed(`invalid arguments for ${call.tool_name}: ${invalid}`);
  let raw: string;
  try {
    raw = await tool.run(args, { session_id: call.session_id, turn_id: call.turn_id, tool_call_id: call.tool_call_id });
  } catch (err) {
    return failed(err instanceof Error ? err.message : String(err));
  }
  return { status: "ok", error: null, result: capResult(raw, deps.maxResultBytes).text };
}
