// Test fixtures: wordy text of a known size and direct seeding of a session's history.
import type { Core } from "../../runtime/core.ts";
import { estimateTokens } from "../../runtime/tokens.ts";

/** n distinct words: summaries keep only the first few, so they come out much shorter. */
export const words = (n: number, tag = "w") => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(" ");

export type Seed = Array<[role: string, content: string, tool_name?: string]>;

export async function seed(core: Core, sessionId: string, rows: Seed): Promise<number> {
  await core.sessions.append(sessionId, rows.map(([role, content, tool_name]) => ({ role, content, tool_name: tool_name ?? null })));
  return rows.reduce((n, [, c]) => n + estimateTokens(c), 0);
}

/** A clock the test moves by hand. */
export function manualClock(start = Date.UTC(2030, 0, 1)) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}
