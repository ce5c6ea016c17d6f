// memory-reinject: a summarizing compaction loses the detail of earlier turns, including the
// project conventions. post_compaction (kind summarize / micro_summarize) marks the session; the
// next pre_llm_call of that session injects the conventions once and clears the mark.
// KV: session-scoped "pending" (the mark); plugin-wide "conventions" (the text, else DEFAULT).
// Conventions an operator sets with /conventions are durable instead: they go into the plugin's
// system-prompt section (KV "hookbox.system_prompt"), part of every model call of every session
// and untouched by compaction, so nothing needs re-injecting for them.
import { beginCall, getString, kvDelete, kvGet, kvSet, outputString, quote, GLOBAL } from "../lib";

const PENDING = "pending";
const CONVENTIONS = "conventions";
const SYSTEM_PROMPT = "hookbox.system_prompt";
const DEFAULT =
  "Project conventions (re-injected after the conversation was summarized): TypeScript strict; " +
  "imports use explicit .ts extensions; tests use node:test and pass on Node and Deno; small modules " +
  "with one job each; short comments that say why.";

function conventions(): string {
  const c = kvGet(GLOBAL, CONVENTIONS);
  return c === null || c.length == 0 ? DEFAULT : c;
}

export function post_compaction(): i32 {
  const input = beginCall();
  const kind = getString(input, "kind");
  if (kind != "summarize" && kind != "micro_summarize") return 0;
  // After a rotating summarize, session_id is the NEW session: the next turn runs there.
  const sid = getString(input, "session_id");
  if (sid === null || sid.length == 0) return 0;
  kvSet(sid, PENDING, "1");
  const old = getString(input, "old_session_id");
  if (old !== null && old.length > 0 && old != sid) kvDelete(old, PENDING);
  return 0;
}

export function pre_llm_call(): i32 {
  const input = beginCall();
  const sid = getString(input, "session_id");
  if (sid === null || kvGet(sid, PENDING) === null) return 0;
  kvDelete(sid, PENDING);
  if (kvGet(GLOBAL, SYSTEM_PROMPT) !== null) return 0; // durable: already in every model call
  outputString('{"context":' + quote(conventions()) + "}");
  return 0;
}

/** `/conventions` shows the text; `/conventions <text>` replaces it (plugin-wide). */
export function command_conventions(): i32 {
  const input = beginCall();
  const args = getString(input, "raw_args");
  if (args !== null && args.trim().length > 0) {
    kvSet(GLOBAL, CONVENTIONS, args.trim());
    kvSet(GLOBAL, SYSTEM_PROMPT, "Project conventions: " + args.trim());
  }
  outputString('{"conventions":' + quote(conventions()) + "}");
  return 0;
}
