// Per-plugin logs: a bounded ring per plugin of what it logged (hookbox_log), wrote to stdout/stderr
// (WASI), and how its failed calls ended. Served by GET /v1/plugins/:name/logs and shown by
// `hookbox plugins logs NAME` / `hookbox plugins call`; the server's own stderr log keeps its lines too.
import type { LogLevel } from "../log.ts";

import type { PluginLogSource } from "../../host-api/binding.ts";
export type { PluginLogSource };

export interface PluginLogEntry {
  /** Increasing per plugin: `since` asks for the entries after one already seen. */
  seq: number;
  t: string;
  level: LogLevel;
  source: PluginLogSource;
  message: string;
}

/** Entries kept per plugin (older ones are dropped first) and the longest message kept. */
export const LOG_RING_SIZE = 500;
export const MAX_LOG_MESSAGE_CHARS = 2000;
/** The largest `since` a query may give (the API's and the CLI's bound alike). */
export const MAX_LOG_SEQ = 999_999_999;

export class PluginLogRing {
  private readonly entries: PluginLogEntry[] = [];
  private seq = 0;
  /** Entries dropped because the ring was full. */
  dropped = 0;

  constructor(
    private readonly capacity = LOG_RING_SIZE,
    private readonly now: () => number = Date.now,
  ) {}

  push(level: LogLevel, source: PluginLogSource, message: string): void {
    if (this.entries.length >= this.capacity) {
      this.entries.shift();
      this.dropped++;
    }
    const text = message.length > MAX_LOG_MESSAGE_CHARS ? `${message.slice(0, MAX_LOG_MESSAGE_CHARS)}…` : message;
    this.entries.push({ seq: ++this.seq, t: new Date(this.now()).toISOString(), level, source, message: text });
  }

  /** The newest `limit` entries after `since` (seq), oldest first. */
  list(since = 0, limit = this.capacity): PluginLogEntry[] {
    const after = this.entries.filter((e) => e.seq > since);
    return after.slice(Math.max(0, after.length - limit));
  }
}

/** One ring per plugin name, kept across reloads and re-enables of that plugin. */
export class PluginLogs {
  private readonly rings = new Map<string, PluginLogRing>();

  constructor(private readonly now: () => number = Date.now) {}

  of(plugin: string): PluginLogRing {
    let ring = this.rings.get(plugin);
    if (!ring) this.rings.set(plugin, (ring = new PluginLogRing(LOG_RING_SIZE, this.now)));
    return ring;
  }
}
