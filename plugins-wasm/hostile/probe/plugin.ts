// Benchmark plugin for the worker path: the work a memory or retrieval plugin does per turn.
// pre_llm_call reads the session's last 20 messages through sessions:read and returns nothing;
// post_llm_call fetches the URL stored in plugin-wide KV "url" through http: (a local server in
// the bench). Both check what they got, so a denied or empty answer fails the call.
import { beginCall, getString, http, kvGet, quote, sessionMessages, GLOBAL } from "../../lib";

export function pre_llm_call(): i32 {
  const input = beginCall();
  const sid = getString(input, "session_id");
  if (sid === null) return 0;
  const messages = sessionMessages(sid, 20);
  if (messages.length <= 2) throw new Error("probe: no messages read");
  return 0;
}

export function post_llm_call(): i32 {
  beginCall();
  const url = kvGet(GLOBAL, "url");
  if (url === null) return 0;
  const res = http('{"method":"GET","url":' + quote(url) + "}");
  if (res.indexOf('"status":200') < 0) throw new Error("probe: http call failed");
  return 0;
}
