// The hostile plugins (plugins-wasm/hostile/) with the failure each must be stopped by and the
// operator config it runs under, a stream of ordinary HTTP traffic to run beside them, and small
// hand-made WASM modules that a loader must refuse.
import type { TestServer } from "./server.ts";

export interface HostileCase {
  name: string;
  /** The typed failure that stops it; null: it must run but see nothing it should not. */
  kind: "fuel" | "memory" | "trap" | "bad_output" | "denied" | null;
  grants: string[];
  limits?: Record<string, number>;
}

/** Tight limits keep the suite fast: a loop burns 2 M fuel units, not the manifest's 50 M. */
export const HOSTILE_CASES: HostileCase[] = [
  { name: "loop", kind: "fuel", grants: [], limits: { fuel: 2_000_000 } },
  { name: "membomb", kind: "memory", grants: [], limits: { memory_pages: 32 } },
  { name: "trap", kind: "trap", grants: [] },
  { name: "bigoutput", kind: "bad_output", grants: [] },
  { name: "badjson", kind: "bad_output", grants: [] },
  { name: "ungranted", kind: "denied", grants: [] }, // requests kv, sessions:read, http: none granted
  { name: "httpsnoop", kind: "denied", grants: ["http:example.com"] }, // granted exactly what it asks
  { name: "kvsnoop", kind: null, grants: ["kv"] },
];

export interface TrafficResult {
  requests: number;
  /** Requests that did not get a 2xx, with what they got. */
  failed: string[];
  /** Every turn answer (for what was injected). */
  turns: Array<{ injected: Array<{ plugin: string; context: string }> }>;
}

/**
 * `clients` concurrent users, each doing `rounds` of: create a session, two turns (one with a tool
 * call), a summarizing compaction, archive, delete. Every hook a plugin can subscribe to fires.
 */
export async function traffic(server: TestServer, clients: number, rounds: number): Promise<TrafficResult> {
  const result: TrafficResult = { requests: 0, failed: [], turns: [] };
  const call = async (method: string, path: string, body?: unknown) => {
    result.requests++;
    const res = await server.api(method, path, body);
    if (res.status < 200 || res.status >= 300) result.failed.push(`${method} ${path}: ${res.status} ${JSON.stringify(res.body).slice(0, 160)}`);
    return res;
  };
  const client = async (c: number) => {
    for (let r = 0; r < rounds; r++) {
      const created = await call("POST", "/v1/sessions", { platform: "test", source: { user_id: `user${c}`, chat_id: `chat${c}` } });
      const id = created.body?.session?.id as string | undefined;
      if (!id) continue;
      for (const message of [`hello from ${c}/${r}`, "calc (2+3)*4", "one more thing to say"]) {
        const t = await call("POST", `/v1/sessions/${id}/turns`, { message });
        if (t.status === 200) result.turns.push(t.body);
      }
      await call("POST", `/v1/sessions/${id}/compress`, { kind: "summarize" });
      await call("POST", `/v1/sessions/${id}/archive`);
      await call("DELETE", `/v1/sessions/${id}`);
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
  return result;
}

/** A minimal WASM module that imports `module`.`name` (a () -> i32 function) and exports it as `exportAs`. */
export function wasmImporting(module: string, name: string, exportAs: string): Uint8Array {
  const bytes: number[] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
  const str = (s: string) => [s.length, ...Buffer.from(s)];
  const section = (id: number, content: number[]) => bytes.push(id, content.length, ...content);
  section(1, [0x01, 0x60, 0x00, 0x01, 0x7f]); // one type: () -> i32
  section(2, [0x01, ...str(module), ...str(name), 0x00, 0x00]); // import func of type 0
  section(3, [0x01, 0x00]); // one function of type 0
  section(5, [0x01, 0x00, 0x01]); // memory, min 1 page
  section(7, [0x02, ...str(exportAs), 0x00, 0x01, ...str("memory"), 0x02, 0x00]);
  section(10, [0x01, 0x04, 0x00, 0x10, 0x00, 0x0b]); // body: call import; end
  return new Uint8Array(bytes);
}

/** A module whose only export is an i32 global named `name` (not a function under a hook's name). */
export function globalExporting(name: string): Uint8Array {
  const n = [...Buffer.from(name)];
  const section = (id: number, bytes: number[]) => [id, bytes.length, ...bytes];
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, ...section(6, [1, 0x7f, 0x00, 0x41, 0x00, 0x0b]), ...section(7, [1, n.length, ...n, 0x03, 0x00])]);
}
