// A test server with the real WASM plugin runtime over the built plugins-wasm/ modules.
import { fileURLToPath } from "node:url";
import type { ConfigInput } from "../../runtime/config.ts";
import { startPluginHost, type PluginManager } from "../../runtime/plugins/manager.ts";
import { startTestServer, type TestServer, type TestServerOptions } from "./server.ts";
import { seed, words } from "./seed.ts";

export const SEED_DIR = fileURLToPath(new URL("../../plugins-wasm", import.meta.url));
export const HOSTILE_DIR = fileURLToPath(new URL("../../plugins-wasm/hostile", import.meta.url));

type PluginsConfig = NonNullable<ConfigInput["plugins"]>;

export interface PluginServer extends TestServer {
  plugins: PluginManager;
}

export async function startPluginServer(plugins: PluginsConfig, opts: Omit<TestServerOptions, "pluginHost"> = {}): Promise<PluginServer> {
  const server = await startTestServer({ ...opts, config: { ...opts.config, plugins }, pluginHost: startPluginHost });
  return Object.assign(server, { plugins: server.core.plugins as PluginManager });
}

/** A session with an identity, so commands and hooks carry user, chat and platform. */
export async function newSession(server: TestServer, user = "u-1", platform = "telegram"): Promise<string> {
  const res = await server.api("POST", "/v1/sessions", { platform, source: { user_id: user, chat_id: `chat-${user}` } });
  if (res.status !== 201 && res.status !== 200) throw new Error(`create session: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.session.id as string;
}

export async function turn(server: TestServer, sessionId: string, message: string) {
  const res = await server.api("POST", `/v1/sessions/${sessionId}/turns`, { message });
  if (res.status !== 200) throw new Error(`turn: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function command(server: TestServer, name: string, body: Record<string, unknown>) {
  return server.api("POST", `/v1/commands/${name}`, body);
}

export async function pluginInfo(server: TestServer, name: string) {
  const res = await server.api("GET", `/v1/plugins/${name}`);
  if (res.status !== 200) throw new Error(`plugin ${name}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.plugin;
}

/** Enough history that a summarizing compaction really changes the stored conversation. */
export async function seedLongHistory(server: TestServer, sessionId: string): Promise<void> {
  await seed(server.core, sessionId, [
    ["user", words(300, "a")],
    ["assistant", words(300, "b")],
    ["user", words(300, "c")],
    ["assistant", words(300, "d")],
    ["user", words(50, "e")],
    ["assistant", words(50, "f")],
  ]);
}
