// The `abort` every plugin links (`--use abort=plugins-wasm/lib/abort/hookboxAbort`, set by
// build.mjs): Extism supplies no env.abort. It records the message as the call's error, then traps.
import { error_set } from "./env";
import { storeString } from "./mem";

export function hookboxAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  const where = fileName === null ? "" : " at " + fileName + ":" + line.toString() + ":" + column.toString();
  error_set(storeString("abort: " + (message === null ? "" : message) + where));
  unreachable();
}
