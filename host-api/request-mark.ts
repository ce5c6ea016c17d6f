// Every request a plugin makes through http: names the plugin in this header, set by the host over
// whatever the plugin asked for (host-api/functions.ts): hookbox's own API refuses such requests
// (runtime/http/guards.ts), so a grant of a loopback or LAN host never reaches the operator's API,
// of this process or another.
export const PLUGIN_REQUEST_HEADER = "hookbox-plugin";
