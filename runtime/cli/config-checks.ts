// The checks of the configuration against plugins.dir that serve (and every CLI command that opens
// the core) makes before it starts; `hookbox config` makes them too, so it fails where serve would.
import { checkCommandUsers, checkPluginNames, type Config } from "../config.ts";
import { declaredCommands, scanPluginDir } from "../plugins/loader.ts";

/** The config's plugin and command names against plugins.dir; throws ConfigError naming each problem. */
export function checkAgainstPluginDir(config: Config): void {
  const plugins = scanPluginDir(config.plugins.dir);
  checkPluginNames(config, plugins.map((p) => p.folder));
  checkCommandUsers(config, declaredCommands(plugins));
}
