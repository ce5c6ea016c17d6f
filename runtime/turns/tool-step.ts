// One tool call of a turn, built-in or plugin tool alike:
//   arguments past the size any tool takes refused (before any guard reads them) ->
//   pre_tool_call (directives: block beats modify, plugin name order, fail-closed plugins, running
//   or not) -> when a plugin modified the arguments, pre_tool_call again with the final ones, whose
//   blocks still block (a guard judges what will run, not what the model asked) ->
//   arguments checked against the tool's JSON Schema -> the tool runs (a plugin tool in its
//   sandbox) -> result size-capped -> transform_tool_result (first valid replacement in plugin name
//   order) -> post_tool_call with what the model will see.
// A tool that fails, is unknown or is blocked gives the model a result saying so; the turn goes on.
import type { HookDispatcher, HookReport } from "../../hooks/dispatcher.ts";
import type { ToolDirective, ToolStatus } from "../../hooks/catalogue.ts";
import { argumentsTooLarge, type ToolCallContext, type ToolRegistry } from "../tools/registry.ts";
import { capResult } from "../tools/cap.ts";
import { decide, type Verdict } from "./directives.ts";
import type { ToolRun } from "./events.ts";
import { storedText } from "../sessions/stored-text.ts";
import { log } from "../log.ts";
import type { PluginHost } from "../plugins/host.ts";
import { within } from "../util/within.ts";

export interface ToolStepDeps {
  dispatcher: HookDispatcher;
  tools: ToolRegistry;
  /** Largest result the model sees (plugins.tool_result_max_bytes). */
  maxResultBytes: number;
  /** plugins.fail_closed */
  failClosed: ReadonlySet<string>;
  /** Whether a fail-closed plugin is running, and its status (active, failed, disabled...) for the message when it is not. */
  plugins?: Pick<PluginHost, "get" | "running" | "settled">;
}

/**
 * How long a tool call waits for a plugin it needs (the tool's, a fail-closed guard) that is between
 * its stop and its start (a reload under `serve --watch`, an enable): a start takes 50-300 ms, a
 * first compile of a large module longer. Past it the call goes on without the plugin.
 */
const STARTING_WAIT_MS = 3_000;

/** Waits (at most STARTING_WAIT_MS) for `plugin` when it is active but not running: starting. */
async function startOf(deps: ToolStepDeps, plugin: string): Promise<void> {
  const host = deps.plugins;
  if (!host || host.running(plugin) || host.get(plugin)?.status !== "active") return;
  await within(host.settled(plugin), STARTING_WAIT_MS, () => undefined);
}

export interface ToolCallRequest extends ToolCallContext {
  tool_name: string;
  args: Record<string, unknown>;
  /** The model's arguments were not a JSON object (args is {}): unless a plugin's modify gives some, the tool does not run. */
  args_error?: string | undefined;
}

export async function runToolCall(deps: ToolStepDeps, req: ToolCallRequest): Promise<ToolRun> {
  // Arguments no tool takes are refused before the guards get them: 3 MB of them ran a guard out of
  // its memory five times, quarantined it, and the tools it blocked ran (an outside probe).
  const oversized = argumentsTooLarge(req.args);
  // A fail-closed guard that is starting is waited for: judged without it, the call is blocked.
  if (!oversized && deps.failClosed.size > 0) await Promise.all([...deps.failClosed].map((p) => startOf(deps, p)));
  // Refused, they reach no plugin at all: the later hooks hear of the call with no arguments.
  const verdict: Verdict = oversized ? { blocked: false, args: {}, modified: false, applied: [] } : await guarded(deps, req);
  const args = verdict.blocked ? req.args : verdict.args;
  // A block's message stands in for the result: held to the same cap as any result the model sees.
  const capped = (text: string) => capResult(text, deps.maxResultBytes).text;
  const t0 = performance.now();
  const outcome =
    oversized ? failed(`invalid arguments for ${req.tool_name}: ${oversized}`)
    : verdict.blocked ? { status: "blocked" as const, error: null, result: capped(verdict.message) }
    : req.args_error !== undefined && !verdict.modified ? failed(`invalid arguments for ${req.tool_name}: ${req.args_error}`)
    : await execute(deps, req, args);
  const duration_ms = performance.now() - t0;
  const { args_error: _, args: _asked, ...call } = req;
  const fields = { ...call, args, result: outcome.result, duration_ms, status: outcome.status, error: outcome.error };
  const transformed = firstReplacement(await deps.dispatcher.emit("transform_tool_result", fields), "result");
  if (transformed) fields.result = capped(transformed.text);
  fields.result = storedText(fields.result);
  await deps.dispatcher.emit("post_tool_call", fields);
  return {
    ...fields,
    requested_args: verdict.blocked || !verdict.modified ? undefined : req.args,
    plugin: deps.tools.get(req.tool_name)?.plugin ?? null,
    directives: verdict.applied.map((d) => (d.action === "modify" ? d : { ...d, message: capped(d.message) })),
    transformed_by: transformed?.plugin ?? null,
  };
}

/**
 * The pre_tool_call plugins' verdict on the call. Modified arguments are delivered again, final, to
 * every plugin, and only a block counts then: each plugin saw the model's arguments, so a modify of
 * a plugin named before or after a guard slipped past it (an outside probe).
 */
async function guarded(deps: ToolStepDeps, req: ToolCallRequest): Promise<Verdict> {
  const verdict = verdictOf(deps, req.args, await deps.dispatcher.emit("pre_tool_call", req));
  if (verdict.blocked || !verdict.modified) return verdict;
  const recheck = verdictOf(deps, verdict.args, await deps.dispatcher.emit("pre_tool_call", { ...req, args: verdict.args }));
  if (!recheck.blocked) return verdict;
  return { ...recheck, applied: [...verdict.applied, ...recheck.applied.filter((d) => d.action !== "modify")] };
}

function verdictOf(deps: ToolStepDeps, args: Record<string, unknown>, pre: HookReport): Verdict {
  return decide(args, { results: pre.results as Array<{ plugin: string; value: ToolDirective }>, missing: missingOf(deps, pre), failClosed: deps.failClosed });
}

/**
 * Plugins that did not answer pre_tool_call (failed, cooling off, quarantined), with why; and the
 * fail-closed ones that are not running (failed to load, disabled, not enabled): a guard that is not
 * running blocks as one that failed does (one whose module broke let every call through).
 */
function missingOf(deps: ToolStepDeps, report: HookReport): Array<{ plugin: string; why: string }> {
  const missing = [
    ...report.failed.map((f) => ({ plugin: f.plugin, why: `${f.kind}: ${f.message}` })),
    ...report.skipped.map((s) => ({ plugin: s.plugin, why: s.why })),
  ];
  if (deps.failClosed.size === 0) return missing;
  // Judged by what this emit asked, not by who subscribes now: a guard whose reload ended while the
  // emit awaited another plugin was subscribed by then, and never asked.
  const asked = new Set([...report.delivered, ...missing.map((m) => m.plugin)]);
  for (const plugin of deps.failClosed) {
    if (asked.has(plugin)) continue;
    // Running without the hook, it is never asked: no opinion. Not running, it blocks, also while
    // an active one is between its stop and start (a reload, an enable): its status says "active".
    const info = deps.plugins?.get(plugin);
    if (deps.plugins?.running(plugin) && info && !info.hooks.includes("pre_tool_call")) continue;
    if (deps.plugins?.running(plugin)) missing.push({ plugin, why: "not asked: it was (re)started while the call was judged" });
    else missing.push({ plugin, why: `not running (${info?.status === "active" ? "starting" : (info?.status ?? "not loaded")})` });
  }
  return missing;
}

/**
 * A transform hook's first valid replacement in plugin name order (a failed plugin has none); one
 * longer than `maxChars` is not valid (logged).
 */
export function firstReplacement(report: HookReport, key: "result" | "response", maxChars = Infinity): { plugin: string; text: string } | undefined {
  for (const r of report.results) {
    const v = r.value as string | Record<string, string> | null;
    const text = typeof v === "string" ? v : v?.[key];
    if (typeof text !== "string") continue;
    if (text.length <= maxChars) return { plugin: r.plugin, text };
    log("warn", "transform replacement not taken: too long", { plugin: r.plugin, chars: text.length, max: maxChars });
  }
  return undefined;
}

const failed = (error: string) => ({ status: "error" as const, error, result: `error: ${error}` });

async function execute(
  deps: ToolStepDeps,
  call: ToolCallContext & { tool_name: string },
  args: Record<string, unknown>,
): Promise<{ status: ToolStatus; error: string | null; result: string }> {
  let tool = deps.tools.get(call.tool_name);
  const starting = tool ? undefined : deps.tools.notServing(call.tool_name);
  if (starting?.status === "starting") {
    await startOf(deps, starting.plugin);
    tool = deps.tools.get(call.tool_name);
  }
  if (!tool) return failed(deps.tools.missing(call.tool_name));
  const invalid = await deps.tools.check(call.tool_name, args);
  if (invalid) return failed(`invalid arguments for ${call.tool_name}: ${invalid}`);
  let raw: string;
  try {
    raw = await tool.run(args, { session_id: call.session_id, turn_id: call.turn_id, tool_call_id: call.tool_call_id });
  } catch (err) {
    return failed(err instanceof Error ? err.message : String(err));
  }
  return { status: "ok", error: null, result: capResult(raw, deps.maxResultBytes).text };
}
