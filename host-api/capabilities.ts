// Capabilities: what a plugin requests (manifest) and what the operator grants (config). A plugin
// gets the intersection, never more; a host function called without its grant is refused with a
// typed "denied" error that fails the whole call, and is logged and counted like any failed call.
import { PluginCallError } from "../hooks/failures.ts";

/** kv, sessions:read, http:<host> or http:<host>:<port> (a port 1-65535). */
export const CAPABILITY_PATTERN = /^(kv|sessions:read|http:[a-z0-9.-]+(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?)$/;

export class Grants {
  readonly kv: boolean;
  readonly sessionsRead: boolean;
  private readonly httpHosts: ReadonlySet<string>;

  constructor(
    readonly list: readonly string[],
    /** What the manifest requested (a denial says which side is missing). */
    readonly requested: readonly string[] = list,
  ) {
    this.kv = list.includes("kv");
    this.sessionsRead = list.includes("sessions:read");
    this.httpHosts = new Set(list.filter((c) => c.startsWith("http:")).map((c) => c.slice("http:".length)));
  }

  /** Requested capabilities the operator granted nothing of: host calls that need them fail as `denied`. */
  get ungranted(): string[] {
    return this.requested.filter((r) => !this.list.some((g) => g === r || (r.startsWith("http:") && g.startsWith(`${r}:`))));
  }

  /**
   * A URL is allowed when its host is granted, any port or its own: a default port counts as
   * written (URL drops it: https://h/ and https://h:443/ are both host "h").
   */
  allowsHttp(url: URL): boolean {
    return this.httpHosts.has(url.hostname) || this.httpHosts.has(`${url.hostname}:${portOf(url)}`);
  }

  get anyHttp(): boolean {
    return this.httpHosts.size > 0;
  }

  /**
   * Granted host functions that are asynchronous (the call suspends, or runs in a worker where the runtime cannot suspend): only HTTP.
   * sessions:read reads the database synchronously, in-thread, like KV.
   */
  get needsAsyncHost(): boolean {
    return this.anyHttp;
  }
}

/** The URL's port, its scheme's default when none is written. */
export const portOf = (url: URL): string => url.port || (url.protocol === "https:" ? "443" : "80");

/**
 * What both sides allow, in the manifest's order. `http:<host>` allows every port of the host, so
 * it meets the other side's `http:<host>:<port>` in that port: a manifest asking for a host and an
 * operator pinning a port (or the other way round) give that port.
 */
export function grantedOf(requested: readonly string[], operatorGrants: readonly string[] | undefined): Grants {
  const granted = operatorGrants ?? [];
  const meet = (a: string, others: readonly string[]): string[] => {
    if (others.includes(a)) return [a];
    if (!a.startsWith("http:")) return [];
    const host = a.slice("http:".length);
    if (host.includes(":")) return others.includes(`http:${host.split(":")[0]}`) ? [a] : [];
    return others.filter((o) => o.startsWith(`http:${host}:`)); // a port of this host the other side pins
  };
  return new Grants([...new Set(requested.flatMap((c) => meet(c, granted)))], requested);
}

/**
 * Fails a host call made without its grant, naming the missing side: the plugin's manifest did not
 * request the capability, or it did and the operator did not grant it. `capability` may be several
 * that would each do (a URL's "http:host:port" and "http:host"); the manifest's own requests for the
 * same host are named, so a port that differs from the requested one is plain.
 */
export function deny(plugin: string, fn: string, capability: string | readonly string[], requested: readonly string[] = []): never {
  const options = typeof capability === "string" ? [capability] : capability;
  const needs = `${fn} needs capability ${options.map((c) => `"${c}"`).join(" or ")}`;
  if (options.some((c) => requested.includes(c))) {
    throw new PluginCallError("denied", `${needs}, which the operator has not granted to ${plugin} (config plugins.grants.${plugin})`);
  }
  const hostOf = (c: string) => (c.startsWith("http:") ? c.slice("http:".length).split(":")[0] : undefined);
  const host = hostOf(options[0]!);
  const near = host === undefined ? [] : requested.filter((c) => hostOf(c) === host);
  const asks = near.length > 0 ? `; it requests ${near.map((c) => `"${c}"`).join(", ")}` : "";
  throw new PluginCallError("denied", `${needs}, which ${plugin}'s manifest.json does not request${asks} (add it to "capabilities"; the operator must also grant it)`);
}
