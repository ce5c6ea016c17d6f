// What pre_tool_call plugins decided about one tool call. Rules (issue 10):
//   - block beats modify; among blocks the first plugin in name order gives the message;
//   - modifies are merged over the arguments in plugin name order (a later plugin's keys win);
//   - a plugin the operator marks fail-closed (plugins.fail_closed) that failed or was skipped
//     (trap, time-out, cool-off, quarantine...) blocks the call; every other failure fails open.
import type { ToolDirective } from "../../hooks/catalogue.ts";
import type { AppliedDirective } from "./events.ts";

export interface DirectiveInput {
  /** Each plugin's parsed pre_tool_call output, in plugin name order. */
  results: ReadonlyArray<{ plugin: string; value: ToolDirective }>;
  /** Plugins whose call failed or was skipped, with why. */
  missing: ReadonlyArray<{ plugin: string; why: string }>;
  failClosed: ReadonlySet<string>;
}

export type Verdict =
  | { blocked: true; message: string; applied: AppliedDirective[] }
  | { blocked: false; args: Record<string, unknown>; modified: boolean; applied: AppliedDirective[] };

export function decide(args: Record<string, unknown>, input: DirectiveInput): Verdict {
  const applied: AppliedDirective[] = [];
  for (const m of input.missing) {
    if (input.failClosed.has(m.plugin)) applied.push({ plugin: m.plugin, action: "fail_closed", message: `blocked: ${m.plugin} (fail-closed) did not answer: ${m.why}` });
  }
  for (const r of input.results) {
    if (r.value?.action === "block") applied.push({ plugin: r.plugin, action: "block", message: r.value.message });
  }
  const firstBlock = sortByPlugin(applied)[0];
  if (firstBlock && (firstBlock.action === "block" || firstBlock.action === "fail_closed")) {
    return { blocked: true, message: firstBlock.message, applied: sortByPlugin(applied) };
  }
  let merged = args;
  for (const r of input.results) {
    if (r.value?.action !== "modify") continue;
    merged = { ...merged, ...r.value.args };
    applied.push({ plugin: r.plugin, action: "modify", args: r.value.args });
  }
  return { blocked: false, args: merged, modified: merged !== args, applied };
}

const sortByPlugin = <T extends { plugin: string }>(xs: T[]) => [...xs].sort((a, b) => (a.plugin < b.plugin ? -1 : a.plugin > b.plugin ? 1 : 0));
