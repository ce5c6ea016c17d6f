// Records every hook payload delivered to an in-process subscriber, for assertions.
import { callbackSubscriber, type HookDispatcher } from "../../hooks/dispatcher.ts";
import { HOOK_NAMES, type HookName, type HookPayload } from "../../hooks/catalogue.ts";

export interface HookRecorder {
  readonly events: Array<HookPayload<HookName>>;
  of<H extends HookName>(hook: H): Array<HookPayload<H>>;
  clear(): void;
}

/**
 * Subscribes a recorder named `name` to `hooks` (default: all). `reply` lets a test answer
 * pre_llm_call (or anything else) from the same subscriber.
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
    of: <H extends HookName>(hook: H) => events.filter((e) => e.hook === hook) as Array<HookPayload<H>>,
    clear: () => void events.splice(0),
  };
}
