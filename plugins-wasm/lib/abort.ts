// The `abort` every plugin links (`--use abort=.../abort/hookboxAbort`, set by build.mjs): Extism
// supplies no env.abort. It hands the message to the host (hookbox_abort ends the call as a trap
// that carries it: `throw new Error("x")` fails with "abort: x at file:line:col"), then traps in case
// the host returned anyway.
import { storeString } from "./mem";

// @ts-ignore: decorator
@external("extism:host/user", "hookbox_abort")
declare function hookbox_abort(message: u64): void;

export function hookboxAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  const where = fileName === null ? "" : " at " + fileName + ":" + line.toString() + ":" + column.toString();
  hookbox_abort(storeString("abort: " + (message === null ? "" : message) + where));
  unreachable();
}
