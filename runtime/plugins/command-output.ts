// A command's reply text from the plugin's output: a JSON string is the text itself; an object with
// a string "text" field uses that; any other JSON is returned as compact JSON; no output is "".
export function commandOutput(output: string | undefined): string {
  if (output === undefined) return "";
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
