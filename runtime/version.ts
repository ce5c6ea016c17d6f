// hookbox's version, from package.json (shown by `hookbox --version`, /healthz and /metrics).
import { readFileSync } from "node:fs";

export const VERSION: string = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;
