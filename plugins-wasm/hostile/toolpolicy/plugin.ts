// Test plugin for issue 10: reacts to cue words.
//   pre_tool_call, cue in the arguments: "block-me" -> block; "long-block-me" -> block with a
//     2,000-character message; "modify-me" -> modify (expression
//     "6*7", text "modified"); "badargs-me" -> modify to arguments the schema refuses; "trap-me" -> trap;
//     "smuggle-me" -> modify the text to one holding "block-me" (which it blocks when it sees it);
//     "protokeys-me" -> modify keys named constructor, prototype and __proto__ (and note).
//   transform_tool_result, cue in the arguments: "transform-me" -> replaced; "transform-trap" -> trap;
//     "nul-me" -> replaced by a text holding a NUL character (U+0000).
//   transform_llm_output: "shout-me" in the answer -> replaced; "nul-me" -> a text holding a NUL;
//     "long-me" -> 100,001 characters (longer than a replacement may be).
//   post_tool_call (an observer): counts events in KV, then returns text that is not JSON.
//   The manifest also names "on_gateway_restart", a hook this host does not know.
import { beginCall, getRaw, getString, kvGet, kvSet, outputString, GLOBAL } from "../../lib";

function has(s: string | null, cue: string): bool {
  return s !== null && s!.indexOf(cue) >= 0;
}

export function pre_tool_call(): i32 {
  const input = beginCall();
  const args = getRaw(input, "args");
  if (has(args, "trap-me")) unreachable();
  if (has(args, "long-block-me")) outputString('{"action":"block","message":"' + "B".repeat(2_000) + '"}');
  else if (has(args, "block-me")) outputString('{"action":"block","message":"blocked by toolpolicy"}');
  else if (has(args, "modify-me")) outputString('{"action":"modify","args":{"expression":"6*7","text":"modified"}}');
  else if (has(args, "badargs-me")) outputString('{"action":"modify","args":{"expression":42}}');
  else if (has(args, "smuggle-me")) outputString('{"action":"modify","args":{"text":"now block-me"}}');
  else if (has(args, "protokeys-me")) outputString('{"action":"modify","args":{"constructor":"SAFE","note":"guarded","prototype":"P","__proto__":"X"}}');
  return 0;
}

export function post_tool_call(): i32 {
  beginCall();
  const n = kvGet(GLOBAL, "post_seen");
  kvSet(GLOBAL, "post_seen", (n === null ? 1 : I32.parseInt(n!) + 1).toString());
  outputString("this is not JSON, and an observer's output is ignored anyway");
  return 0;
}

export function transform_tool_result(): i32 {
  const input = beginCall();
  const args = getRaw(input, "args");
  if (has(args, "transform-trap")) unreachable();
  if (has(args, "transform-me")) outputString('{"result":"transformed by toolpolicy"}');
  else if (has(args, "nul-me")) outputString('{"result":"tool\\u0000result"}');
  return 0;
}

export function transform_llm_output(): i32 {
  const input = beginCall();
  const response = getString(input, "response");
  if (has(response, "shout-me")) outputString('"SHOUTED BY TOOLPOLICY"');
  else if (has(response, "nul-me")) outputString('"kept\\u0000after the NUL"');
  else if (has(response, "long-me")) outputString('"' + "L".repeat(100_001) + '"');
  return 0;
}

export function command_policy(): i32 {
  beginCall();
  const n = kvGet(GLOBAL, "post_seen");
  outputString('{"post_seen":' + (n === null ? "0" : n!) + "}");
  return 0;
}
