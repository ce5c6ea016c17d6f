// Records every hook payload delivered to an in-process subscriber, for assertions.
import { callbackSubscriber, type HookDispatcher } from "../../hooks/dispatcher.ts";
import * as v from "valibot";
import { HOOK_FIELDS, HOOK_NAMES, SCHEMA_VERSION, type HookName, type HookPayload } from "../../hooks/catalogue.ts";

export interface HookRecorder {
  readonly events: Array<HookPayload<HookName>>;
  of<H extends HookName>(hook: H): Array<HookPayload<H>>;
  clear(): void;
}

/** Throws when a delivered payload does not match the catalogue's schema for its hook. */
function checkPayload(p: HookPayload<HookName>): void {
  const res = v.safeParse(HOOK_FIELDS[p.hook], p);
  if (!res.success || p.schema_version !== SCHEMA_VERSION) {
    const issue = res.issues?.[0];
    throw new Error(`${p.hook} payload does not match the catalogue: ${issue ? `${v.getDotPath(issue)}: ${issue.message}` : "schema_version"}`);
  }
}

/**
 * Subscribes a recorder named `name` to `hooks` (default: all). `reply` lets a test answer
 * pre_llm_call (or anything else) from the same subscriber. `of()` also checks every payload it
 * returns against the catalogue (the payload schemas are the test oracle).
 */
export function recordHooks(
  dispatcher: HookDispatcher,
  opts: { name?: string; hooks?: readonly HookName[]; reply?: (p: HookPayload<HookName>) => unknown } = {},
): HookRecorder {
  const events: Array<HookPayload<HookName>> = [];
  dispatcher.subscribe(
    callbackSubscriber(opts.name ?? "recorder", opts.hooks ?? HOOK_NAMES, (p) => {
      events.push(structuredClone(p) as HookPayload<HookName>);
      return opts.reply?.(p);
    }),
  );
  return {
    events,
    of: <H extends HookName>(hook: H) => {
      const found = events.filter((e) => e.hook === hook) as Array<HookPayload<H>>;
      found.forEach(checkPayload);
      return found;
    },
    clear: () => void events.splice(0),
  };
}
