// The start-up bench's child: in a fresh process (as a restart is), opens a core on the given
// database with the plugin folder given, and prints one JSON line: how long createCore took (db,
// migrations, plugin load: read, instrument or cache hit, compile, first instance) and the RSS.
// Usage: startup.ts <config.json>
import { readFileSync } from "node:fs";
import process from "node:process";
import { parseConfig } from "../../runtime/config.ts";
import { createCore } from "../../runtime/core.ts";
import { setLogLevel } from "../../runtime/log.ts";
import { startPluginHost } from "../../runtime/plugins/manager.ts";

setLogLevel("silent");
const config = parseConfig(JSON.parse(readFileSync(process.argv[2]!, "utf8")), {});
const withPlugins = config.plugins.enabled.length > 0;
const t0 = performance.now();
const core = await createCore(config, withPlugins ? { pluginHost: startPluginHost } : {});
const ms = performance.now() - t0;
const active = core.plugins.list().filter((p) => p.status === "active").length;
const rss = process.memoryUsage().rss;
await core.close();
console.log(JSON.stringify({ ms, rss, active }));
process.exit(0);
