// tool-guard: an example guard. pre_tool_call answers {"action":"block","message":...} for a tool
// the operator blocked with /guard (plugin-wide KV "blocked:<tool>"); the message becomes the tool
// result and the tool does not run. Nothing is returned for other tools (no opinion).
// Mark it fail-closed (plugins.fail_closed) so that a guard that fails blocks instead of allowing.
import { beginCall, getString, kvDelete, kvGet, kvList, kvSet, outputString, quote, quoteArray, GLOBAL } from "../lib";

const PREFIX = "blocked:";

export function pre_tool_call(): i32 {
  const input = beginCall();
  const tool = getString(input, "tool_name");
  if (tool === null || kvGet(GLOBAL, PREFIX + tool!) === null) return 0;
  outputString('{"action":"block","message":' + quote("tool " + tool! + " is blocked by tool-guard") + "}");
  return 0;
}

/** Longest tool name /guard takes (UTF-8 bytes): a KV key is at most 512, and no tool's name is near it. */
const NAME_MAX = 128;

/** `/guard` lists; `/guard NAME` blocks NAME; `/guard -NAME` unblocks it. */
export function command_guard(): i32 {
  const input = beginCall();
  const raw = getString(input, "raw_args");
  const arg = raw === null ? "" : raw!.trim();
  if (String.UTF8.byteLength(arg) > NAME_MAX + 1) {
    outputString('{"error":"a tool name is at most ' + NAME_MAX.toString() + ' bytes"}');
    return 0;
  }
  if (arg.startsWith("-") && arg.length > 1) kvDelete(GLOBAL, PREFIX + arg.substring(1));
  else if (arg.length > 0) kvSet(GLOBAL, PREFIX + arg, "1");
  const keys = kvList(GLOBAL, PREFIX);
  for (let i = 0; i < keys.length; i++) keys[i] = keys[i].substring(PREFIX.length);
  outputString('{"blocked":' + quoteArray(keys) + "}");
  return 0;
}
