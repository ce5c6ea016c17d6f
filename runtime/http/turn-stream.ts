// POST /v1/sessions/:id/turns with `Accept: text/event-stream`: the turn as server-sent events
// (turn, injected, tool_call, tool_result, delta..., then answer or error). The turn runs to its end
// whatever the client does: one that disconnects mid-stream only stops hearing about it, so the
// session is left exactly as after a non-streamed turn (all of the exchange stored, or none).
import type { Context } from "hono";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import type { Core } from "../core.ts";
import type { TurnEvent } from "../turns/events.ts";
import type { InFlight } from "../util/in-flight.ts";
import { describeError } from "./errors.ts";

/** Whether Accept lists text/event-stream with a weight above 0 (`;q=0` means "not this one", RFC 9110). */
export function wantsEventStream(c: Context): boolean {
  return (c.req.header("accept") ?? "").split(",").some((part) => {
    const [type, ...params] = part.split(";").map((p) => p.trim().toLowerCase());
    if (type !== "text/event-stream") return false;
    const q = params.find((p) => p.startsWith("q="));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/**
 * A streamed turn that is a /command: it streams nothing but its answer, so it runs before the
 * stream starts, and a command refused or failed (unknown: 404, forbidden: 403) answers plain JSON
 * as a turn not streamed does (it was a 200 stream holding an `error` event; an outside probe).
 */
export async function streamCommand(c: Context, core: Core, sessionId: string, message: string): Promise<Response> {
  const answer = await core.turns.run(sessionId, message);
  return streamSSE(c, (stream) => stream.writeSSE({ event: "answer", data: JSON.stringify(answer), id: "1" }));
}

/** `work` counts the turn until its end (a shutdown waits for it, whether or not the client stays). */
export function streamTurn(c: Context, core: Core, sessionId: string, message: string, work: InFlight): Response {
  return streamSSE(c, (stream) => work.track(streamEvents(c, core, sessionId, message, stream)));
}

async function streamEvents(c: Context, core: Core, sessionId: string, message: string, stream: SSEStreamingApi): Promise<void> {
  let id = 0;
  // Events are written in order, each once the client has taken the one before. Past a backlog of
  // BACKLOG events, a delta joins the delta queued last (their texts joined): a 100 kB answer
  // streamed word by word to a client that did not read held 50,000 events (5 MB) per such client;
  // one that keeps up gets each delta as it came. A client that has gone gets nothing more.
  const queue: TurnEvent[] = [];
  let draining: Promise<void> | undefined;
  const gone = () => stream.aborted || stream.closed;
  const drain = async () => {
    for (let e = queue.shift(); e !== undefined && !gone(); e = queue.shift()) {
      try {
        await stream.writeSSE({ event: e.event, data: JSON.stringify(e.data), id: String(++id) });
      } catch {
        break; // the client went away: the turn goes on without it
      }
    }
    queue.length = 0;
    draining = undefined;
  };
  const send = (e: TurnEvent) => {
    if (gone()) return;
    const last = queue.at(-1);
    if (e.event === "delta" && last?.event === "delta" && queue.length >= BACKLOG) last.data = { text: last.data.text + e.data.text };
    else queue.push(e.event === "delta" ? { event: "delta", data: { text: e.data.text } } : e);
    draining ??= drain();
  };
  try {
    send({ event: "answer", data: await core.turns.run(sessionId, message, send) });
  } catch (err) {
    const { status, body } = describeError(err, c);
    failures.set(c, { status, code: body.error.code });
    send({ event: "error", data: body });
  }
  await draining;
}

/** Events queued for a client beyond which its deltas are joined. */
const BACKLOG = 64;

/** A streamed turn's failure, by its request: the status and code a plain turn would have answered. */
const failures = new WeakMap<Context, { status: number; code: string }>();

/** How the streamed turn of request `c` failed, once its stream has ended (undefined: it did not). */
export const streamFailure = (c: Context) => failures.get(c);
