// whoami: echoes the caller's identity as the command call carries it (source is identity, not
// authorization). Missing values are JSON null.
import { beginCall, getObject, getString, outputString, quote } from "../lib";

function field(s: string | null): string {
  return s === null ? "null" : quote(s);
}

export function command_whoami(): i32 {
  const input = beginCall();
  const source = getObject(input, "source");
  const userId: string | null = source < 0 ? null : getString(input, "user_id", source);
  outputString(
    '{"user_id":' + field(userId) + ',"platform":' + field(getString(input, "platform")) +
      ',"session_id":' + field(getString(input, "session_id")) +
      ',"session_key":' + field(getString(input, "session_key")) + "}",
  );
  return 0;
}
