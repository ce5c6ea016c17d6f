// In-thread plugin code runs on the server's own thread, so while it runs nothing else is answered.
// Two bounds keep the server responsive whatever a plugin does (a concurrent request waits at most
// about STRETCH_MS + INLINE_SLICE_MS):
// - one in-thread call (or start function) may run INLINE_SLICE_MS; past that the fuel meter stops
//   it (SliceExpired) and the sandbox runs the call again in a worker thread, where it has its whole
//   fuel and time budget, and keeps the plugin there for DEMOTION_MS;
// - calls made back to back (a fan-out to many plugins, a bulk delete) give the event loop a turn
//   once their in-thread work since its last turn passes STRETCH_MS.
import { setImmediate } from "node:timers";

/** Longest stretch of one in-thread call before it moves to a worker. */
export const INLINE_SLICE_MS = 50;
/** In-thread work since the event loop's last turn after which the next call lets it turn first. */
export const STRETCH_MS = 10;
/** How long a plugin whose call outgrew its slice runs in a worker before it is tried in-thread again. */
export const DEMOTION_MS = 30_000;

/** Thrown by the fuel meter when an in-thread call outgrows its slice (never reaches a caller). */
export class SliceExpired extends Error {
  constructor() {
    super(`ran past the in-thread slice of ${INLINE_SLICE_MS} ms`);
  }
}

/** Deno runs a setImmediate callback before it polls pending network I/O; Node after. */
const immediateSkipsIo = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

/**
 * Calls `fn` after one full turn of the event loop, I/O included: setImmediate on Node (no wait),
 * a 0 ms timer on Deno, where a request waiting on a socket was otherwise not served between two
 * plugin calls.
 */
function afterTurn(fn: () => void): void {
  if (immediateSkipsIo) setTimeout(fn, 0);
  else setImmediate(fn);
}

export function turnEventLoop(): Promise<void> {
  return new Promise<void>((resolve) => afterTurn(resolve));
}

/** When the current run of in-thread work began; undefined once the event loop has turned since. */
let stretchStart: number | undefined;

function openStretch(now: number): void {
  stretchStart = now;
  afterTurn(() => {
    stretchStart = undefined;
  });
}

/** True when the event loop should turn before more in-thread plugin work (see yieldTurn). */
export function needsTurn(now: number): boolean {
  if (stretchStart === undefined) {
    openStretch(now);
    return false;
  }
  return now - stretchStart >= STRETCH_MS;
}

/** Lets pending I/O (other requests) run, then starts a new stretch. */
export async function yieldTurn(): Promise<void> {
  await turnEventLoop();
  openStretch(Date.now());
}
