// Benchmark plugin: a context injector that fires on every turn (the seed plugins inject only after
// a compaction), so a turn with N copies loaded carries N injections. Work per call: read the
// payload, one KV read, one output.
import { beginCall, getString, kvGet, outputString, quote, GLOBAL } from "../../lib";

const DEFAULT_NOTE = "Reminder: answer briefly and cite the file you changed.";

export function pre_llm_call(): i32 {
  const input = beginCall();
  const sid = getString(input, "session_id");
  if (sid === null) return 0;
  const note = kvGet(GLOBAL, "note");
  const text = (note === null || note.length == 0 ? DEFAULT_NOTE : note) + " (session " + sid + ")";
  outputString('{"context":' + quote(text) + "}");
  return 0;
}
