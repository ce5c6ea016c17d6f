// hookbox example plugin in AssemblyScript, written against the helper library as a package
// (@hookbox/plugin-lib, plugins-wasm/lib) with the typed payload views generated from the hook
// catalogue. Exports return 0 on success; `return fail("why")` ends the call as a failure.
import { beginCall, fail, kvGet, kvSet, log, outputString, quote, CommandPayload, OnSessionStartPayload, GLOBAL, INFO } from "@hookbox/plugin-lib";

export function on_session_start(): i32 {
  const p = new OnSessionStartPayload(beginCall()); // ALWAYS beginCall() first
  log(INFO, "session started: " + p.session_id + " on " + p.platform);
  return 0;
}

export function command_hello_as(): i32 {
  const p = new CommandPayload(beginCall());
  const args = p.raw_args;
  if (args == "fail") return fail('asked to fail (raw_args was "fail")');
  const seen = kvGet(GLOBAL, "greetings");
  const n = (seen === null ? 0 : I32.parseInt(seen)) + 1;
  kvSet(GLOBAL, "greetings", n.toString());
  const text = "hello from AssemblyScript" + (args.length > 0 ? ", " + args : "") + " (greeting #" + n.toString() + ")";
  outputString('{"text":' + quote(text) + "}");
  return 0;
}
