// The checks of the configuration against plugins.dir that serve (and every CLI command that opens
// the core) makes before it starts; `hookbox config` makes them too, so it fails where serve would.
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { checkCommandUsers, checkPluginNames, ConfigError, type Config } from "../config.ts";
import { log } from "../log.ts";
import { declaredCommands, scanPluginDir } from "../plugins/loader.ts";

/**
 * The config's plugin and command names against plugins.dir; throws ConfigError naming each problem.
 * A plugins.dir that does not exist is a warning (added to config.warnings, and logged): a mistyped
 * path otherwise started a server with no plugins and said nothing.
 */
export function checkAgainstPluginDir(config: Config): void {
  const exists = existsSync(config.plugins.dir);
  if (exists && !statSync(config.plugins.dir).isDirectory()) {
    throw new ConfigError(`plugins.dir (HOOKBOX_PLUGINS_DIR): ${resolve(config.plugins.dir)} is not a directory`);
  }
  const plugins = scanPluginDir(config.plugins.dir);
  // A missing folder the configuration names plugins in is refused there, once; else it is a warning.
  checkPluginNames(config, plugins.map((p) => p.folder), exists);
  if (!exists) {
    const warning = `plugins.dir ${resolve(config.plugins.dir)} does not exist: no plugin will load`;
    config.warnings.push(warning);
    log("warn", warning, { origin: "plugins.dir" });
  }
  checkCommandUsers(config, declaredCommands(plugins));
}
