// Plugins' injected context for one turn: bounded in total, and never the reason the user's history
// is compacted. It rides on the turn's user message for this turn's model calls only (not stored).
import { log } from "../log.ts";
import type { Injected } from "./events.ts";

/**
 * The injections that fit in `maxChars` together, taken in plugin name order; one that does not fit
 * is dropped (with a warning) and later, smaller ones are still kept, so one plugin's flood never
 * crowds out the others.
 */
export function capInjections(sessionId: string, injected: readonly Injected[], maxChars: number): Injected[] {
  const kept: Injected[] = [];
  const dropped: string[] = [];
  let left = maxChars;
  for (const i of injected) {
    if (i.context.length <= left) {
      kept.push(i);
      left -= i.context.length;
    } else dropped.push(i.plugin);
  }
  if (dropped.length > 0) {
    log("warn", "injected context over the turn's limit dropped (plugins.max_injected_chars_per_turn)", { session_id: sessionId, plugins: dropped, limit: maxChars });
  }
  return kept;
}

/** The user message a model call sees: the user's text, then the injected context. */
export class TurnPrompt {
  constructor(
    readonly text: string,
    private injected: readonly Injected[],
  ) {}

  get content(): string {
    return this.injected.length === 0 ? this.text : `${this.text}\n\n${this.injected.map((i) => i.context).join("\n\n")}`;
  }

  /** What the model calls of this turn carry (empty once dropped). */
  get carried(): readonly Injected[] {
    return this.injected;
  }

  /**
   * On a context overflow the injections go first: true when there were any to drop (the call is
   * then tried again without them, before anything of the user's history is compacted).
   */
  dropInjected(sessionId: string): boolean {
    if (this.injected.length === 0) return false;
    log("warn", "injected context dropped: the model's context overflowed with it", { session_id: sessionId, plugins: this.injected.map((i) => i.plugin) });
    this.injected = [];
    return true;
  }
}
