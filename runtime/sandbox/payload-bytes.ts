// The UTF-8 bytes of a call's input payload. A fan-out hands every plugin the same payload string (Delivery.json() builds it once): it is
// encoded once, into one reused buffer. TextEncoder.encode allocates an ArrayBuffer each time: 1 us
// for a few bytes, 5 us for 2 KB (Node and Deno alike), against 0.1 us for encodeInto. A call that
// runs synchronously is done with the bytes before the next payload is encoded; an in-thread one
// that may outlive that (suspended, the SDK's first call) gets a copy of its own (ownInput); a
// worker call's input is copied into the worker's shared area as the call is posted
// (worker-instance.ts), and this thread's CallIo is not read while it runs there.
// While a synchronous call runs (syncCallStarted), nothing overwrites the buffer: should a host function
// ever start another plugin's call, that call's payload gets a buffer of its own.
const encoder = new TextEncoder();
const SCRATCH_MAX = 64 * 1024;
let scratch = new Uint8Array(1024);
let lastText: string | undefined;
let lastBytes = new Uint8Array(0);
/** Synchronous plugin calls running now (nested only if a host function ever started one). */
let syncCalls = 0;
/** A synchronous call reads the buffer from now until syncCallEnded(). */
export function syncCallStarted(): void {
  syncCalls++;
}
export function syncCallEnded(): void {
  syncCalls--;
}

/** `text` as UTF-8: the bytes of the last payload again, or freshly encoded (into the scratch buffer when it may be). */
export function payloadBytes(text: string): Uint8Array {
  if (text === lastText) return lastBytes;
  lastText = text;
  const worst = text.length * 3; // UTF-8 bytes per UTF-16 unit, at most
  if (worst > SCRATCH_MAX || syncCalls > 0) return (lastBytes = encoder.encode(text));
  if (scratch.length < worst) scratch = new Uint8Array(Math.min(SCRATCH_MAX, Math.max(worst, scratch.length * 2)));
  return (lastBytes = scratch.subarray(0, encoder.encodeInto(text, scratch).written));
}

/** `bytes` as a call that may outlive the next payload's encoding can keep them. */
export const ownInput = (bytes: Uint8Array): Uint8Array => (bytes.buffer === scratch.buffer ? bytes.slice() : bytes);
