// Endpoints no plugin may reach over http:, whatever it was granted: the libSQL server hookbox keeps
// its own data in. sqld answers SQL over HTTP to whoever reaches its port (tokens are optional), so a
// plugin granted `http:127.0.0.1` on a node next to it read every session's messages, rewrote other
// plugins' KV and disabled them (an outside probe did). hookbox's own API refuses plugin requests by
// their mark (request-mark.ts); the database cannot be asked to. A request is refused when it goes to
// the server's port on one of its addresses, or on any address of this machine while the server is
// on this machine (loopback, 0.0.0.0, an interface's address all reach a server listening on them).
// A server without TLS is not reached by name on its port at all: the name is resolved again when
// the request connects, and a name the plugin's owner controls can answer differently then (DNS
// rebinding). Over TLS the server's certificate would not match the plugin's name.
import { isIP } from "node:net";
import { lookup } from "node:dns/promises";
import { networkInterfaces } from "node:os";
import { portOf } from "./capabilities.ts";

export interface ReservedEndpoint {
  /** What the refusal says. */
  what: string;
  host: string;
  port: string;
  /** Whether it speaks TLS (then a name cannot be pointed at it: its certificate would not match). */
  tls: boolean;
}

/** The database server of `dbUrl` as an endpoint, or undefined for an embedded file. */
export function databaseEndpoint(dbUrl: string): ReservedEndpoint | undefined {
  if (dbUrl.startsWith("file:") || dbUrl === ":memory:") return undefined;
  let url: URL;
  try {
    // libsql:// and wss:// speak TLS (443 unless given), ws:// and http:// not (80).
    url = new URL(dbUrl.replace(/^(libsql|wss):/, "https:").replace(/^ws:/, "http:"));
  } catch {
    return undefined;
  }
  return { what: "the database server hookbox uses", host: url.hostname, port: portOf(url), tls: url.protocol === "https:" };
}

/** Why `url` reaches `endpoint`, or may when it connects (see the top of this file); undefined when it does not. */
export async function refusal(url: URL, endpoint: ReservedEndpoint): Promise<string | undefined> {
  if (portOf(url) !== endpoint.port) return undefined;
  const refused = `${url.host} is ${endpoint.what}: no plugin may reach it, whatever it is granted`;
  if (!endpoint.tls && isIP(bare(url.hostname)) === 0) return `${refused} (on its port, a host name may point to it when the request connects: name an IP address instead)`;
  const [target, server] = await Promise.all([addressesOf(url.hostname), addressesOf(endpoint.host)]);
  if (target.some((a) => server.includes(a))) return refused;
  const local = localAddresses();
  const isLocal = (a: string) => local.has(a) || a.startsWith("127.");
  return server.some(isLocal) && target.some(isLocal) ? refused : undefined;
}

/** A URL's hostname without an IPv6 literal's brackets. */
const bare = (hostname: string) => (hostname.startsWith("[") ? hostname.slice(1, -1) : hostname);

async function addressesOf(hostname: string): Promise<string[]> {
  try {
    return (await lookup(bare(hostname), { all: true })).map((a) => normal(a.address));
  } catch {
    return [];
  }
}

/** An IPv4 address as IPv6 maps it (::ffff:127.0.0.1, or as the URL parser writes it, ::ffff:7f00:1) is the IPv4 one. */
function normal(address: string): string {
  const a = address.toLowerCase();
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (dotted) return dotted[1]!;
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(a);
  if (!hex) return a;
  const [hi, lo] = [parseInt(hex[1]!, 16), parseInt(hex[2]!, 16)];
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join(".");
}

/** This machine's addresses (besides 127.0.0.0/8): the wildcards, ::1 and each interface's. */
function localAddresses(): Set<string> {
  const local = new Set(["0.0.0.0", "::", "::1"]);
  try {
    for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) local.add(normal(a.address));
  } catch {
    // A runtime that will not list them: loopback and the wildcards still count.
  }
  return local;
}
