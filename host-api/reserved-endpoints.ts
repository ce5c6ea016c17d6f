// Endpoints no plugin may reach over http:, whatever it was granted: the libSQL server hookbox keeps
// its own data in. sqld answers SQL over HTTP to whoever reaches its port (tokens are optional), so a
// plugin granted `http:127.0.0.1` on a node next to it read every session's messages, rewrote other
// plugins' KV and disabled them (an outside probe did). hookbox's own API refuses plugin requests by
// their mark (request-mark.ts); the database cannot be asked to. A request is refused when it goes to
// the server's port on one of its addresses, or on any address of this machine while the server is
// on this machine (loopback, 0.0.0.0, an interface's address all reach a server listening on them).
import { lookup } from "node:dns/promises";
import { networkInterfaces } from "node:os";
import { portOf } from "./capabilities.ts";

export interface ReservedEndpoint {
  /** What the refusal says. */
  what: string;
  host: string;
  port: string;
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
  return { what: "the database server hookbox uses", host: url.hostname, port: portOf(url) };
}

/** Whether `url` reaches `endpoint` (see the top of this file); a name that does not resolve reaches nothing. */
export async function reaches(url: URL, endpoint: ReservedEndpoint): Promise<boolean> {
  if (portOf(url) !== endpoint.port) return false;
  const [target, server] = await Promise.all([addressesOf(url.hostname), addressesOf(endpoint.host)]);
  if (target.some((a) => server.includes(a))) return true;
  const local = localAddresses();
  const isLocal = (a: string) => local.has(a) || a.startsWith("127.");
  return server.some(isLocal) && target.some(isLocal);
}

async function addressesOf(hostname: string): Promise<string[]> {
  const host = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
  try {
    return (await lookup(host, { all: true })).map((a) => normal(a.address));
  } catch {
    return [];
  }
}

/** An IPv4 address as IPv6 maps it (::ffff:127.0.0.1) is the IPv4 one. */
const normal = (address: string) => address.toLowerCase().replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, "$1");

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
