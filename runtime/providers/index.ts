// Picks the provider the operator configured.
import type { ProviderConfig } from "../config.ts";
import { LocalProvider } from "./local.ts";
import { OpenAIProvider } from "./openai.ts";
import type { Provider } from "./types.ts";

export function createProvider(cfg: ProviderConfig): Provider {
  if (cfg.type === "openai") return new OpenAIProvider(cfg);
  return new LocalProvider(cfg);
}
