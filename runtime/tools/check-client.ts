// Checks a plugin tool's arguments in the check thread (check-thread.ts), one per process, started
// with the first plugin tool: the server's thread waits for nothing, and a check that outlives
// CHECK_TIMEOUT_MS (a schema and arguments built to be costly: 999 allOf branches over 8,000
// values held the thread 25 s; 6,500 required names ran Node's heap out) is refused and ended with
// the thread, which starts again for the next check. A thread round trip costs tens of us.
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import { WORKER_EXEC_ARGV, workerModule } from "../sandbox/worker-code.ts";

/** The longest a check may take; a real tool's takes well under a millisecond. */
export const CHECK_TIMEOUT_MS = 250;
/** The check thread's heap (Node; Deno does not limit a worker's): a check that needs more fails. */
const CHECK_HEAP_MB = 256;
/**
 * After a check of a schema ran out of time, that schema's checks are refused unchecked for this
 * long: each such check costs a thread CHECK_TIMEOUT_MS and a new thread (on Deno a new worker
 * holds the server's thread ~100 ms while it is made).
 */
export const CHECK_COOLOFF_MS = 60_000;

export interface CheckRequest {
  id: number;
  /** The schema's id; the schema itself comes with the first request of each id a thread gets. */
  schemaId: number;
  schema?: unknown;
  args: unknown;
}

export type CheckAnswer = { id: number; problem: string | null } | { ready: true };

const ENTRY = new URL("./check-thread.ts", import.meta.url);

class CheckThread {
  private up: Promise<MessagePort> | undefined;
  private worker: Worker | undefined;
  /** Schema ids the running thread has. */
  private readonly known = new Set<number>();
  private next = 0;
  private readonly waiting = new Map<number, (problem: string | null) => void>();
  /** Checks go to the thread one at a time: each one's deadline runs from when the thread gets it. */
  private queue: Promise<unknown> = Promise.resolve();
  /** The schema of the check the thread has now (cooled off if the thread dies under it). */
  private current: number | undefined;
  /** Schema id -> when its checks run again (after one ran out of time). */
  private readonly cooling = new Map<number, number>();

  /** Starts the thread (once; again after it was ended). */
  start(): Promise<MessagePort> {
    this.up ??= workerModule(ENTRY).then(
      (url) =>
        new Promise<MessagePort>((resolve, reject) => {
          const { port1, port2 } = new MessageChannel();
          const worker = new Worker(url, { workerData: { port: port2 }, transferList: [port2], execArgv: WORKER_EXEC_ARGV, resourceLimits: { maxOldGenerationSizeMb: CHECK_HEAP_MB } });
          this.worker = worker;
          port1.on("message", (m: CheckAnswer) => {
            if (!("ready" in m)) {
              const answer = this.waiting.get(m.id);
              this.waiting.delete(m.id);
              return answer?.(m.problem);
            }
            // Up: an idle thread keeps no process alive (a check's own timer does while it waits).
            worker.unref();
            port1.unref();
            resolve(port1);
          });
          // Out of its heap (resourceLimits) Node reports an 'error' before the 'exit': either ends it.
          const died = (why: string) => {
            if (this.worker === worker) this.ended(why);
            reject(new Error(`the check thread ${why}`));
          };
          worker.once("error", (err) => died(`failed: ${err.message}`));
          worker.once("exit", () => died("stopped"));
        }),
    );
    this.up.catch(() => (this.up = undefined)); // tried again by the next check
    return this.up;
  }

  /** Why `args` do not fit the schema, or null; a check past CHECK_TIMEOUT_MS is refused. */
  async check(schemaId: number, schema: unknown, args: unknown, tool: string): Promise<string | null> {
    const until = this.cooling.get(schemaId);
    if (until !== undefined && Date.now() < until) {
      return `a check of tool ${tool}'s arguments took longer than ${CHECK_TIMEOUT_MS} ms; its checks are refused unchecked until ${new Date(until).toISOString()}`;
    }
    this.cooling.delete(schemaId);
    const turn = this.queue.then(() => this.send(schemaId, schema, args, tool));
    this.queue = turn.catch(() => undefined);
    return await turn;
  }

  private async send(schemaId: number, schema: unknown, args: unknown, tool: string): Promise<string | null> {
    const port = await this.start();
    const id = ++this.next;
    this.current = schemaId;
    const request: CheckRequest = this.known.has(schemaId) ? { id, schemaId, args } : { id, schemaId, schema, args };
    this.known.add(schemaId);
    return await new Promise<string | null>((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        this.ended(`took longer than ${CHECK_TIMEOUT_MS} ms`);
        resolve(`checking the arguments against tool ${tool}'s schema took longer than ${CHECK_TIMEOUT_MS} ms: refused (fewer arguments, or a simpler schema)`);
      }, CHECK_TIMEOUT_MS);
      this.waiting.set(id, (problem) => {
        clearTimeout(timer);
        this.current = undefined;
        resolve(problem);
      });
      port.postMessage(request);
    });
  }

  /**
   * Ends the thread; the check it had is refused (`why`), and its schema's checks are refused
   * unchecked for CHECK_COOLOFF_MS. The next check starts a thread again.
   */
  private ended(why: string): void {
    const worker = this.worker;
    [this.worker, this.up] = [undefined, undefined];
    this.known.clear();
    void worker?.terminate();
    if (this.current !== undefined) this.cooling.set(this.current, Date.now() + CHECK_COOLOFF_MS);
    for (const answer of this.waiting.values()) answer(`the check was stopped: its thread ${why}`);
    this.waiting.clear();
  }
}

let shared: CheckThread | undefined;

/** The process's check thread. */
export const checkThread = (): CheckThread => (shared ??= new CheckThread());
