// In-thread plugin code runs on the server's own thread, so while it runs nothing else is answered.
// Two bounds keep the server responsive whatever plugins do (plugin code delays a concurrent
// request by at most about STRETCH_MS + INLINE_SLICE_MS):
// - one in-thread call (or start function) may run INLINE_SLICE_MS; past that the fuel meter stops
//   it (SliceExpired) and the sandbox runs the call again in a worker thread, where it has its whole
//   fuel and time budget, and keeps the plugin there for DEMOTION_MS;
// - calls made back to back (a fan-out to many plugins, a bulk delete) give the event loop a turn
//   once their in-thread work since its last turn passes STRETCH_MS. Only the plugins' own time
//   counts (their calls, less any time suspended): the host's work between calls is there with or
//   without plugins, and counting it made host loops that never wait on I/O yield every 10 ms,
//   which cost a 0 ms timer on Deno then (1-2 ms) and made a turn with one plugin tool 1.5x one with a
//   TS tool there, against 1.1x without those yields.
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
const NOTHING = new Uint8Array(0);

/**
 * Calls `fn` once the event loop has turned: setImmediate on Node, a 0 ms timer on Deno. Cheap to
 * ask for, but on Deno the timer takes 2-2.4 ms: fine for resetting the count, not for waiting on.
 */
function afterTurn(fn: () => void): void {
  if (immediateSkipsIo) setTimeout(fn, 0);
  else setImmediate(fn);
}

/**
 * Polls on Deno per wait: each op's completion is one poll of the event loop, and one request takes
 * a few (accept, read, write): 4 serve a request between two plugin calls, as a timer did.
 */
const IO_POLLS = 4;
/** The longest a loop of waits on Deno goes without one that runs the timers due (a 0 ms timer). */
const TIMER_TURN_MS = 40;
let lastTimerTurn = 0;

async function pollIo(polls: number): Promise<void> {
  for (let i = 0; i < polls; i++) await crypto.subtle.digest("SHA-1", NOTHING);
}

/**
 * Waits for one full turn of the event loop, I/O and due timers included, then counts work from
 * zero. Node: setImmediate (no wait). On Deno a request waiting on a socket was not served between
 * two setImmediate callbacks, and a 0 ms timer, which serves it and runs the timers due before it,
 * takes 2-2.4 ms: a fifth of a 10-plugin fan-out's time there. So a wait on Deno is a few async ops
 * that complete at once (the digest of nothing: no permission, about 40 us each), each completion
 * one poll of the pending I/O; those polls run no timer, so at least every TIMER_TURN_MS the wait
 * is a 0 ms timer.
 */
export async function turnEventLoop(): Promise<void> {
  if (!immediateSkipsIo) await new Promise<void>((resolve) => setImmediate(resolve));
  else if (performance.now() - lastTimerTurn < TIMER_TURN_MS) await pollIo(IO_POLLS);
  else {
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    lastTimerTurn = performance.now();
  }
  work = 0;
}

/** In-thread plugin work (ms) since the event loop last turned. */
let work = 0;
/** A reset is scheduled for the event loop's next turn. */
let resetPending = false;

/** True when the event loop should turn before more in-thread plugin work (see turnEventLoop). */
export function needsTurn(): boolean {
  return work >= STRETCH_MS;
}

/** Counts `ms` of in-thread plugin work; the count starts again once the event loop has turned. */
export function countWork(ms: number): void {
  work += ms;
  if (resetPending) return;
  resetPending = true;
  afterTurn(() => {
    work = 0;
    resetPending = false;
  });
}
