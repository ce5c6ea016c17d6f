// Starts a real hookbox server for a test: a temp directory, a temp libSQL file, the core and the
// HTTP server on 127.0.0.1 port 0. Reused by every suite that talks HTTP.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig, type ConfigInput } from "../../runtime/config.ts";
import { createCore, type Core, type PluginHostFactory } from "../../runtime/core.ts";
import { startServer } from "../../runtime/server.ts";
import type { Provider } from "../../runtime/providers/types.ts";
import { setLogLevel } from "../../runtime/log.ts";
import type { TestDb } from "./dialects.ts";
import { startSqld, type Sqld } from "./sqld.ts";
import { checkResponse } from "./response-check.ts";

export interface TestServerOptions {
  config?: ConfigInput;
  env?: Record<string, string>;
  pluginHost?: PluginHostFactory;
  /** Runs after the core is built and before the server listens (subscribe recorders here). */
  before?: (core: Core) => void | Promise<void>;
  now?: () => number;
  provider?: Provider;
  /** Keep log output (default: silent). */
  verbose?: boolean;
  /** The database: a temp libSQL file (default) or a fresh real sqld started for this server. */
  db?: TestDb;
}

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface TestServer {
  url: string;
  core: Core;
  dir: string;
  api<T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>>;
  close(): Promise<void>;
}

export async function startTestServer(opts: TestServerOptions = {}): Promise<TestServer> {
  if (!opts.verbose) setLogLevel("silent");
  const dir = mkdtempSync(join(tmpdir(), "hookbox-test-"));
  const sqld: Sqld | undefined = opts.db === "sqld" ? await startSqld() : undefined;
  const config = parseConfig(
    { db_url: sqld?.url ?? `file:${join(dir, "hookbox.db")}`, sessions_dir: join(dir, "sessions"), ...opts.config },
    opts.env ?? {},
  );
  let core: Core;
  try {
    core = await createCore(config, { pluginHost: opts.pluginHost, now: opts.now, provider: opts.provider });
  } catch (err) {
    await sqld?.stop();
    throw err;
  }
  await opts.before?.(core);
  const server = await startServer(core, { host: "127.0.0.1", port: 0 });
  const token = config.api_token;
  return {
    url: server.url,
    core,
    dir,
    async api(method, path, body, headers = {}) {
      const h: Record<string, string> = { ...headers };
      if (token && h.authorization === undefined) h.authorization = `Bearer ${token}`;
      if (body !== undefined) h["content-type"] = "application/json";
      const res = await fetch(server.url + path, {
        method,
        headers: h,
        body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
      });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        /* leave as text */
      }
      if (res.headers.get("content-type")?.startsWith("application/json")) checkResponse(method, path, res.status, parsed);
      return { status: res.status, body: parsed as any, headers: res.headers };
    },
    async close() {
      await server.close();
      await core.close();
      await sqld?.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
