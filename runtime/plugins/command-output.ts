// A command's reply text from the plugin's output: a JSON string is the text itself; an object with
// a string "text" field uses that; any other JSON is returned as compact JSON; no output is "".
import { nestsTooDeep } from "../../hooks/results.ts";

export function commandOutput(output: string | undefined): string {
  if (output === undefined) return "";
  // Re-encoding JSON nested deeper than hooks allow overflowed the host's stack (30,000 levels in
  // 60 KB): the reply was a host error and the call counted as ok. Such text is shown as written.
  if (nestsTooDeep(output)) return output;
  let parsed: unknown;
  try {
    parsed = JSON.parse(output);
  } catch {
    return output; // not JSON: shown as the plugin wrote it
  }
  if (typeof parsed === "string") return parsed;
  if (parsed !== null && typeof parsed === "object" && typeof (parsed as { text?: unknown }).text === "string") {
    return (parsed as { text: string }).text;
  }
  return JSON.stringify(parsed);
}
