// A database whose answer to one write is lost after it committed (a server, or the network to it,
// that died right then), on the real storage: `method` of `storage` runs, then throws as the libSQL
// client does when the answer never arrives ("fetch failed"), once, for the first call `when` picks.
import type { Storage } from "../../runtime/storage/db.ts";

export interface LostAnswer {
  /** Whether the answer was lost yet. */
  readonly lost: boolean;
  /** Puts the real method back. */
  restore(): void;
}

export function loseAnswerOnce(
  storage: Storage,
  method: "write" | "batch",
  opts: { when?: (args: unknown[]) => boolean; beforeLoss?: () => Promise<unknown> } = {},
): LostAnswer {
  const target = storage as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const real = target[method]!;
  const state = { lost: false };
  target[method] = async (...args: unknown[]) => {
    const done = await real.apply(storage, args);
    if (state.lost || !(opts.when?.(args) ?? true)) return done;
    state.lost = true;
    await opts.beforeLoss?.();
    throw new TypeError("fetch failed");
  };
  return {
    get lost() {
      return state.lost;
    },
    restore: () => void (target[method] = real),
  };
}
