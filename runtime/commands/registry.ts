// Slash-command registry. Built-ins and plugin commands live side by side; a handler sees the
// caller's identity (session, platform, source) only when it asks for it. `source` is identity,
// not authorization: a sensitive command refuses callers without one and may be limited to user_ids.
import type { Source } from "../../hooks/catalogue.ts";
import { ownValue } from "../util/own.ts";

export const COMMAND_KWARGS = ["session_id", "session_key", "platform", "source"] as const;
export type CommandKwarg = (typeof COMMAND_KWARGS)[number];

export interface CommandCall {
  raw_args: string;
  session_id?: string | null;
  session_key?: string | null;
  platform?: string | null;
  source?: Source | null;
}

export interface CommandSpec {
  name: string;
  description: string;
  /** Owning plugin; absent for built-ins. */
  plugin?: string;
  sensitive?: boolean;
  /** Which caller fields the handler receives besides raw_args (plugins get all of them). */
  wants?: readonly CommandKwarg[];
  run(call: CommandCall): Promise<string> | string;
}

export interface CommandCaller {
  session_id: string | null;
  platform: string | null;
  source: Source | null;
}

/** A declared command whose plugin is not running, and why ("starting": between a reload's stop and start). */
export interface MissingCommand {
  plugin: string;
  status: "failed" | "quarantined" | "disabled" | "starting";
  reason: string | null;
}

export class CommandError extends Error {
  constructor(
    readonly code: "unknown_command" | "forbidden" | "failed" | "plugin_unavailable",
    message: string,
  ) {
    super(message);
    this.name = "CommandError";
  }
}

/** Stable key for "the same conversation" across session rotations: platform + chat + thread. */
export function sessionKey(platform: string | null, source: Source | null): string | null {
  if (!platform || !source?.chat_id) return null;
  return [platform, keyPart(source.chat_id), keyPart(source.thread_id ?? "")].join(":");
}

/**
 * A chat or thread id as one part of a session key: '%' and ':' percent-encoded, so two
 * conversations never share a key (chat "a:b" + thread "c" and chat "a" + thread "b:c" did; Matrix
 * room ids hold colons). Ids without either character are written as they are.
 */
const keyPart = (id: string) => (/[%:]/.test(id) ? id.replace(/%/g, "%25").replace(/:/g, "%3A") : id);

/** Parses "/name rest of line" into its parts; undefined when the text is not a command. */
export function parseSlash(text: string): { name: string; raw_args: string } | undefined {
  const m = /^\/([a-z0-9][a-z0-9_-]*)(?:\s+([\s\S]*))?$/i.exec(text.trim());
  return m ? { name: m[1]!.toLowerCase(), raw_args: (m[2] ?? "").trim() } : undefined;
}

/**
 * A command name two or more plugins claim. Neither runs it (a squatter loaded first must not
 * capture the other's callers, their arguments and identity, nor drop its `sensitive` flag) until
 * the operator disables all but one of them; listed with the claimants and logged by the caller.
 */
export interface CommandConflict {
  name: string;
  plugins: string[];
}

export class CommandRegistry {
  private readonly commands = new Map<string, CommandSpec>();
  /** Every plugin's claim per name, in registration order; a name with two or more is refused. */
  private readonly claims = new Map<string, CommandSpec[]>();

  /** Why a name no live command has is still a plugin's (see whyMissing). */
  private missing: ((name: string) => MissingCommand | undefined) | undefined;

  constructor(private readonly allowedUsers: Readonly<Record<string, readonly string[]>> = {}) {}

  /**
   * Tells the registry which plugin declares a name it has no live command for, and why that plugin
   * does not serve it (failed to load, quarantined, disabled): the answer says so, not "unknown".
   */
  whyMissing(explain: (name: string) => MissingCommand | undefined): void {
    this.missing = explain;
  }

  /** Which plugin that is wanted but not running also declares a plugin command's name ("name (failed)"): it then runs for neither. */
  rivalsFrom(find: (command: string, plugin: string) => string | undefined): void {
    this.rival = find;
  }
  private rival: ((command: string, plugin: string) => string | undefined) | undefined;

  /**
   * Registers a command. A built-in name cannot be taken (throws). A plugin command whose name
   * another plugin already claims is not registered for either: the conflict is returned.
   */
  register(spec: CommandSpec): CommandConflict | undefined {
    const existing = this.commands.get(spec.name);
    const claims = this.claims.get(spec.name) ?? [];
    if ((existing && !existing.plugin) || !spec.plugin) {
      if (existing || claims.length > 0) throw new Error(`command /${spec.name} already registered by ${existing?.plugin ?? claims[0]?.plugin ?? "hookbox"}`);
      this.commands.set(spec.name, spec);
      return undefined;
    }
    claims.push(spec);
    this.claims.set(spec.name, claims);
    return this.settle(spec.name);
  }

  /** Makes a name's only plugin claim live, or none when it is contested. */
  private settle(name: string): CommandConflict | undefined {
    const claims = this.claims.get(name) ?? [];
    if (claims.length === 0) this.claims.delete(name);
    if (claims.length === 1) this.commands.set(name, claims[0]!);
    else this.commands.delete(name);
    return claims.length > 1 ? { name, plugins: claims.map((c) => c.plugin!) } : undefined;
  }

  unregister(name: string): void {
    this.commands.delete(name);
    this.claims.delete(name);
  }

  /** Removes every command a plugin registered (on disable or quarantine); a conflict it was in may resolve. */
  unregisterPlugin(plugin: string): void {
    for (const [name, claims] of this.claims) {
      const rest = claims.filter((c) => c.plugin !== plugin);
      if (rest.length === claims.length) continue;
      this.claims.set(name, rest);
      this.settle(name);
    }
  }

  get(name: string): CommandSpec | undefined {
    return this.commands.get(name);
  }

  /** Names claimed by more than one plugin (none of them runs). */
  conflicts(): CommandConflict[] {
    return [...this.claims]
      .filter(([, c]) => c.length > 1)
      .map(([name, c]) => ({ name, plugins: c.map((x) => x.plugin!) }));
  }

  list(): Array<{ name: string; description: string; plugin: string | null; sensitive: boolean; conflict?: string[] }> {
    const live = [...this.commands.values()].map((c) => {
      // Refused as run() refuses it: a plugin wanted but not running still claims the name.
      const rival = c.plugin !== undefined ? this.rival?.(c.name, c.plugin) : undefined;
      if (rival === undefined) return { name: c.name, description: c.description, plugin: c.plugin ?? null, sensitive: !!c.sensitive };
      const conflict = [c.plugin!, rival.split(" ")[0]!]; // "name (failed)": plugin names hold no space
      return { name: c.name, description: `refused: claimed by plugins ${c.plugin}, ${rival}`, plugin: null, sensitive: !!c.sensitive, conflict };
    });
    const contested = this.conflicts().map((c) => ({
      name: c.name,
      description: `refused: claimed by plugins ${c.plugins.join(", ")}`,
      plugin: null,
      // As its claimants declare it (it runs for none of them either way).
      sensitive: (this.claims.get(c.name) ?? []).some((x) => !!x.sensitive),
      conflict: c.plugins,
    }));
    return [...live, ...contested].sort((a, b) => a.name.localeCompare(b.name));
  }

  async run(name: string, raw_args: string, caller: CommandCaller): Promise<string> {
    const spec = this.commands.get(name);
    const contested = this.claims.get(name);
    // A plugin that declares the name but does not run now (failed to load, quarantined) still
    // claims it: a squatter took over a broken plugin's command, its callers and their identity.
    const rival = spec?.plugin !== undefined ? this.rival?.(name, spec.plugin) : undefined;
    if (spec && rival !== undefined) {
      throw new CommandError("forbidden", `/${name} is claimed by plugins ${spec.plugin} and ${rival}; it runs for neither until the operator disables all but one`);
    }
    if (!spec && contested && contested.length > 1) {
      throw new CommandError(
        "forbidden",
        `/${name} is claimed by plugins ${contested.map((c) => c.plugin).join(" and ")}; it runs for neither until the operator disables all but one`,
      );
    }
    if (!spec) {
      const why = this.missing?.(name);
      if (!why) throw new CommandError("unknown_command", `unknown command /${name}; /commands lists them`);
      const text = `/${name} is a command of plugin ${why.plugin}, which is ${why.status}${why.reason ? ` (${why.reason})` : ""}`;
      // Failed, quarantined or starting: the server cannot serve it now (503). Disabled: not in this deployment (404).
      throw new CommandError(why.status === "disabled" ? "unknown_command" : "plugin_unavailable", text);
    }
    // A command listed in plugins.command_users runs only for its users, sensitive or not: an
    // operator who lists one means it to be limited.
    const allowed = ownValue(this.allowedUsers, name);
    if (spec.sensitive || allowed) {
      // A blank user_id ("  ") is no identity either.
      if (!caller.source?.user_id?.trim()) {
        const why = spec.sensitive ? "is sensitive" : "is limited to listed users (plugins.command_users)";
        throw new CommandError("forbidden", `/${name} ${why} and needs a caller identity (source.user_id)`);
      }
      if (allowed && !allowed.includes(caller.source.user_id)) {
        throw new CommandError("forbidden", `/${name} is not allowed for user ${caller.source.user_id}`);
      }
    }
    const all: CommandCall = {
      raw_args,
      session_id: caller.session_id,
      session_key: sessionKey(caller.platform, caller.source),
      platform: caller.platform,
      source: caller.source,
    };
    const wanted = new Set<CommandKwarg>(spec.plugin ? COMMAND_KWARGS : (spec.wants ?? []));
    const call: CommandCall = { raw_args };
    if (wanted.has("session_id")) call.session_id = all.session_id;
    if (wanted.has("session_key")) call.session_key = all.session_key;
    if (wanted.has("platform")) call.platform = all.platform;
    if (wanted.has("source")) call.source = all.source;
    return spec.run(call);
  }
}
