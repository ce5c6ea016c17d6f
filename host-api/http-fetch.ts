// What hookbox_http does once a request passed its checks (JSON, grant): the fetch, bounded by the
// call's deadline and the response limit, answered as {status, body} or {status: 0, error} for the
// network's failures.
import { Buffer } from "node:buffer";
import * as v from "valibot";
import { PluginCallError } from "../hooks/failures.ts";
import { wholeRecord } from "../hooks/whole-record.ts";
import { PLUGIN_REQUEST_HEADER } from "./request-mark.ts";

export const MAX_HTTP_RESPONSE_BYTES = 1024 * 1024;

export const HttpRequest = v.object({
  method: v.optional(v.picklist(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]), "GET"),
  url: v.pipe(v.string(), v.url()),
  headers: v.optional(wholeRecord(v.string(), v.string())),
  body: v.optional(v.string()),
});
export type HttpRequestOf = v.InferOutput<typeof HttpRequest>;

/**
 * A request cut off by the call's deadline fails the call as a timeout (so the hook's cool-off
 * applies), not as a trap: it is the plugin's time limit that ran out, as if its own code had run on.
 */
export async function fetchLimited(req: HttpRequestOf, plugin: string, deadline: number): Promise<HttpAnswer> {
  // Whole ms: Node's AbortSignal.timeout refuses a fraction, and a hook's deadline has one (the
  // dispatcher's clock is performance.now() based).
  const ms = Math.max(1, Math.ceil(Math.min(deadline - Date.now(), 2 ** 31 - 1)));
  const signal = AbortSignal.timeout(ms);
  // Built first: a request the plugin got wrong (a bad header, credentials in the URL) is its fault.
  let request: Request;
  try {
    const headers = new Headers(req.headers);
    // Hop-by-hop and framing headers are the host's: "Connection: hookbox-plugin" would have a proxy
    // strip the mark below, and the runtimes differ on the rest (undici refuses them when sending).
    for (const name of headers.keys()) {
      if (HOST_HEADERS.has(name) || name.startsWith("proxy-")) throw new Error(`header "${name}" is the host's to set`);
    }
    headers.set(PLUGIN_REQUEST_HEADER, plugin); // replaces the plugin's own, in any case
    request = new Request(req.url, { method: req.method, headers, body: req.body, redirect: "manual", signal }); // a redirect could lead to a host that is not granted
  } catch (err) {
    throw new PluginCallError("trap", `hookbox_http: bad request: ${(err as Error).message}`.slice(0, 500));
  }
  try {
    return await fetchWithin(request);
  } catch (err) {
    if (err instanceof PluginCallError) throw err;
    if (signal.aborted) throw new PluginCallError("timeout", `hookbox_http: ${new URL(req.url).host} did not answer within the call's time limit (${ms} ms left)`);
    // The network's doing (refused, unknown host, reset): an answer the plugin can handle, not a
    // failure of its call (a granted service that is down would otherwise quarantine it). What
    // undici refuses as an argument when it sends is still the plugin's request.
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    if (cause?.code?.startsWith("UND_ERR_INVALID") || cause?.code === "UND_ERR_NOT_SUPPORTED") {
      throw new PluginCallError("trap", `hookbox_http: bad request: ${cause.message ?? cause.code}`.slice(0, 500));
    }
    return { status: 0, body: "", error: `${(err as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ""}`.slice(0, 500) };
  }
}

/** Request headers a plugin may not set (hop-by-hop, framing, the target host). */
const HOST_HEADERS: ReadonlySet<string> = new Set(["connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "expect", "host"]);

/** What hookbox_http answers: the response, or status 0 and why when none came. */
export type HttpAnswer = { status: number; body: string; error?: string };

async function fetchWithin(request: Request): Promise<HttpAnswer> {
  const res = await fetch(request);
  // A declared length within the limit is read in one go; otherwise chunk by chunk, counted. Not a
  // compressed body: its length is the compressed one, and text() would inflate all of it first.
  const declared = Number(res.headers.get("content-length") ?? NaN);
  const encoded = (res.headers.get("content-encoding") ?? "identity") !== "identity";
  if (!encoded && declared >= 0 && declared <= MAX_HTTP_RESPONSE_BYTES) {
    const body = await res.text();
    if (Buffer.byteLength(body) <= MAX_HTTP_RESPONSE_BYTES) return { status: res.status, body };
    throw new PluginCallError("trap", `hookbox_http: response larger than ${MAX_HTTP_RESPONSE_BYTES} bytes`);
  }
  const reader = res.body?.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (reader) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_HTTP_RESPONSE_BYTES) {
      await reader.cancel();
      throw new PluginCallError("trap", `hookbox_http: response larger than ${MAX_HTTP_RESPONSE_BYTES} bytes`);
    }
    chunks.push(value);
  }
  return { status: res.status, body: Buffer.concat(chunks).toString("utf8") };
}

