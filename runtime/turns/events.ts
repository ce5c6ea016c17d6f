// What a turn reports: the tool runs in its answer, and the events a streamed turn sends as they
// happen (server-sent events over HTTP; see runtime/http/turn-stream.ts).
import type { ToolStatus } from "../../hooks/catalogue.ts";
import type { CompactOutcome } from "../compaction/engine.ts";
import type { Usage } from "../providers/types.ts";

/** A pre_tool_call directive a plugin gave, as the turn's answer reports it. */
export type AppliedDirective =
  | { plugin: string; action: "block"; message: string }
  | { plugin: string; action: "modify"; args: Record<string, unknown> }
  | { plugin: string; action: "fail_closed"; message: string };

export interface ToolRun {
  tool_call_id: string;
  tool_name: string;
  /** The arguments the tool ran with (after modify directives). */
  args: Record<string, unknown>;
  /** The arguments the model asked for, when a directive changed them. */
  requested_args?: Record<string, unknown> | undefined;
  /** What the model saw (after transform_tool_result and the size cap). */
  result: string;
  status: ToolStatus;
  error: string | null;
  duration_ms: number;
  /** The plugin that declared the tool; null for a built-in. */
  plugin: string | null;
  directives: AppliedDirective[];
  /** The plugin whose transform_tool_result replaced the result, if one did. */
  transformed_by: string | null;
}

export interface Injected {
  plugin: string;
  context: string;
}

export type TurnResult =
  | { type: "command"; session_id: string; command: string; output: string }
  | {
      type: "reply";
      session_id: string;
      turn_id: string;
      reply: string;
      /** The plugin whose transform_llm_output replaced the model's answer, if one did. */
      transformed_by: string | null;
      injected: Injected[];
      tool_calls: ToolRun[];
      usage: Usage;
      compactions: CompactOutcome[];
    };

/** Streamed as they happen; `answer` (or `error`) is always the last event. */
export type TurnEvent =
  | { event: "turn"; data: { session_id: string; turn_id: string } }
  | { event: "injected"; data: { injected: Injected[] } }
  | { event: "tool_call"; data: { tool_call_id: string; tool_name: string; args: Record<string, unknown> } }
  | { event: "tool_result"; data: ToolRun }
  | { event: "delta"; data: { text: string } }
  | { event: "answer"; data: TurnResult }
  | { event: "error"; data: { error: { code: string; message: string } } };

export type TurnEventSink = (e: TurnEvent) => void;
