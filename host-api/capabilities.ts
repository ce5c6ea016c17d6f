// Capabilities: what a plugin requests (manifest) and what the operator grants (config). A plugin
// gets the intersection, never more; a host function called without its grant is refused with a
// typed "denied" error that fails the whole call, and is logged and counted like any failed call.
import { PluginCallError } from "../hooks/failures.ts";

export const CAPABILITY_PATTERN = /^(kv|sessions:read|http:[a-z0-9.-]+(:[0-9]{1,5})?)$/;

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

  /** A URL is allowed when its host (with or without port) is granted. */
  allowsHttp(url: URL): boolean {
    return this.httpHosts.has(url.host) || this.httpHosts.has(url.hostname);
  }

  get anyHttp(): boolean {
    return this.httpHosts.size > 0;
  }

  /**
   * Granted host functions that are asynchronous (need the plugin to run in a worker): only HTTP.
   * sessions:read reads the database synchronously, in-thread, like KV.
   */
  get needsAsyncHost(): boolean {
    return this.anyHttp;
  }
}

/** Requested capabilities that the operator also granted, in the manifest's order. */
export function grantedOf(requested: readonly string[], operatorGrants: readonly string[] | undefined): Grants {
  const granted = new Set(operatorGrants ?? []);
  return new Grants(requested.filter((c) => granted.has(c)), requested);
}

/**
 * Fails a host call made without its grant, naming the missing side: the plugin's manifest did not
 * request the capability, or it did and the operator did not grant it.
 */
export function deny(plugin: string, fn: string, capability: string, requested: readonly string[] = []): never {
  const host = capability.startsWith("http:") ? capability.slice("http:".length) : undefined;
  const wasRequested = requested.some((c) => c === capability || (host !== undefined && c.startsWith("http:") && c.slice(5).split(":")[0] === host));
  const message = wasRequested
    ? `${fn} needs capability "${capability}", which the operator has not granted to ${plugin} (config plugins.grants.${plugin})`
    : `${fn} needs capability "${capability}", which ${plugin}'s manifest.json does not request (add it to "capabilities"; the operator must also grant it)`;
  throw new PluginCallError("denied", message);
}
