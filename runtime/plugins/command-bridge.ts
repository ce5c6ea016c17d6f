// The bridge from the core into a plugin's sandbox: its hook subscriber for the dispatcher, its
// slash commands and tools, and direct calls (`hookbox plugins call`). Every call is counted in the
// plugin's stats, run again when its guarded KV writes lost a race (`conflict`), and a failure is
// written to the plugin's log ring.
import type { CallResult, HookDispatcher, HookSubscriber } from "../../hooks/dispatcher.ts";
import { PluginCallError } from "../../hooks/failures.ts";
import { CommandError, type CommandCall } from "../commands/registry.ts";
import type { AcceptOutput, CallStart, SandboxResult, WasmPlugin } from "../sandbox/wasm-plugin.ts";
import { commandOutput } from "./command-output.ts";
import type { PluginEntry } from "./entry.ts";
import type { PluginLogs } from "./logs.ts";
import { liftQuarantine } from "./status.ts";

/**
 * A call whose guarded KV writes (kv_incr, kv_cas) lost a race is run again until its deadline, after
 * a random pause that grows with each try up to this many ms (so racing processes part). Not a fixed
 * number of tries: under contention from several processes one writer wins each round, so the others
 * may need many rounds, and a call that gave up early lost its update for no fault of its own.
 */
const CONFLICT_PAUSE_MS = 50;

export class CommandBridge {
  constructor(
    private readonly dispatcher: HookDispatcher,
    private readonly logRings: PluginLogs,
  ) {}

  /** The dispatcher's view of an active plugin. */
  subscriber(e: PluginEntry, sandbox: WasmPlugin): HookSubscriber {
    const { name } = e;
    return {
      name,
      hooks: new Set(e.manifest!.hooks),
      timeoutMs: e.limits!.timeoutMs,
      enforcesDeadline: true,
      // The output is checked inside the call, so a refused output also discards the call's KV writes.
      // d.readOutput itself is the check (a closure made per call costs on the fan-out's hot path).
      // A call that can run synchronously (sandbox.callNow) answers without a promise.
      // The call's clock starts at d's start, before its payload's JSON is made: on the thread for
      // the WASM plugins' sake (callbacks never ask for it), so counted as theirs.
      call: (d) => {
        let r: Promise<SandboxResult> | SandboxResult;
        try {
          r = callRetrying(sandbox, d.hook, d.json(), d.deadline, d.readOutput, d);
        } catch (err) {
          throw this.failed(name, d.hook, err); // not the plugin's doing (callNow never throws): logged all the same
        }
        // A SandboxResult is a CallResult (checked, accepted: d.readOutput's answer): handed on as is.
        if (!(r instanceof Promise)) return r as CallResult;
        return r.then(
          (done) => done as CallResult,
          (err) => {
            throw this.failed(name, d.hook, err);
          },
        );
      },
    };
  }

  /** `/command` of a plugin: its `command_<name>` export with the caller's identity. */
  async runCommand(e: PluginEntry, command: string, call: CommandCall): Promise<string> {
    // The server cannot serve it now (503), as for a plugin that failed to load: not the command's failure.
    const quarantined = this.dispatcher.quarantineOf(e.name);
    if (quarantined) throw new CommandError("plugin_unavailable", `/${command} is a command of plugin ${e.name}, which is quarantined (${quarantined})${liftQuarantine(e.name)}`);
    const input = JSON.stringify({
      raw_args: call.raw_args,
      session_id: call.session_id ?? null,
      session_key: call.session_key ?? null,
      platform: call.platform ?? null,
      source: call.source ?? null,
    });
    try {
      return commandOutput(await this.runExport(e, `command_${command}`, input));
    } catch (err) {
      // A call the host could not serve (its database unreachable, its instance busy past the
      // deadline) is the server's failure (503, retried; an idempotency key is given back), not
      // the command's (422, final).
      const host = (err as { kind?: string }).kind === "unavailable";
      throw new CommandError(host ? "plugin_unavailable" : "failed", `/${command} ${(err as Error).message}`);
    }
  }

  /** A plugin tool's call (its `tool_<name>` export); one that times out cools off (HookDispatcher.coolOffTool). */
  async runTool(e: PluginEntry, tool: string, input: string): Promise<string | undefined> {
    const until = this.dispatcher.toolCoolingOff(e.name, tool);
    if (until !== undefined) throw new Error(`failed (cooloff): tool ${tool} timed out; it is not run until ${new Date(until).toISOString()}`);
    try {
      return await this.runExport(e, `tool_${tool}`, input);
    } catch (err) {
      if ((err as { kind?: string }).kind === "timeout") this.dispatcher.coolOffTool(e.name, tool);
      throw err;
    }
  }

  /**
   * Calls one of the plugin's non-hook exports (a command or a tool) under its limits, counted in
   * its stats; throws "failed (kind): message" when the call fails or the plugin cannot run.
   */
  async runExport(e: PluginEntry, fn: string, input: string): Promise<string | undefined> {
    const quarantined = this.dispatcher.quarantineOf(e.name);
    if (quarantined) throw new Error(`failed: plugin ${e.name} is quarantined (${quarantined})`);
    try {
      return (await this.invoke(e, fn, input)).output;
    } catch (err) {
      const failure = err as PluginCallError;
      throw Object.assign(new Error(`failed (${failure.kind}): ${failure.message}`), { kind: failure.kind });
    }
  }

  /**
   * One call of export `fn`, counted like a command; throws the PluginCallError. `accept` checks the
   * output inside the call, as a hook's is (a refused output fails the call and drops its KV writes).
   */
  async invoke(e: PluginEntry, fn: string, input: string, accept?: AcceptOutput): Promise<{ output: string | undefined; fuel: number; ms: number }> {
    const sandbox = e.sandbox;
    if (!sandbox) throw new PluginCallError("unavailable", `plugin ${e.name} is not active`);
    const t0 = performance.now();
    try {
      const r = await callRetrying(sandbox, fn, input, Date.now() + e.limits!.timeoutMs, accept);
      const ms = performance.now() - t0;
      this.dispatcher.recordExternalCall(e.name, ms, undefined, r.fuel);
      return { output: r.output, fuel: r.fuel, ms };
    } catch (err) {
      const failure = this.failed(e.name, fn, err);
      this.dispatcher.recordExternalCall(e.name, performance.now() - t0, failure, failure.fuel);
      throw failure;
    }
  }

  /** A failed call, as a PluginCallError, also recorded in the plugin's log ring. */
  private failed(plugin: string, fn: string, err: unknown): PluginCallError {
    const failure = err instanceof PluginCallError ? err : new PluginCallError("trap", String(err));
    this.logRings.of(plugin).push("error", "failure", `${fn} failed (${failure.kind}): ${failure.message}`);
    return failure;
  }
}

/**
 * One call, run again when its guarded KV writes lost a race with another writer (`conflict`).
 * Answers without a promise when the first try did (callNow never throws).
 */
function callRetrying(sandbox: WasmPlugin, fn: string, input: string, deadline: number, accept?: AcceptOutput, started?: CallStart): Promise<SandboxResult> | SandboxResult {
  const first = sandbox.callNow(fn, input, deadline, accept, started);
  return first instanceof Promise ? first.catch((err) => retryConflicts(sandbox, err, fn, input, deadline, accept)) : first;
}

async function retryConflicts(sandbox: WasmPlugin, err: unknown, fn: string, input: string, deadline: number, accept?: AcceptOutput): Promise<SandboxResult> {
  for (let attempt = 1; ; attempt++) {
    if (!(err instanceof PluginCallError) || err.kind !== "conflict" || Date.now() > deadline) throw err;
    await new Promise((r) => setTimeout(r, Math.random() * Math.min(CONFLICT_PAUSE_MS, 2 * attempt)));
    try {
      return await sandbox.callNow(fn, input, deadline, accept);
    } catch (next) {
      err = next;
    }
  }
}
