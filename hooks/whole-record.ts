// A valibot record that keeps every key. valibot's own record (and looseObject) leave the keys
// "__proto__", "constructor" and "prototype" out of what they return, unchecked and without an
// issue: a pre_tool_call directive {"action":"modify","args":{"constructor":"SAFE"}} was accepted
// and reported applied while the tool ran with the model's value (an outside probe). Here those keys
// are checked like any other and kept, in the input's key order, as own data properties (what
// JSON.parse makes of them too: nothing reaches a prototype).
import * as v from "valibot";

const SKIPPED_BY_VALIBOT = new Set(["__proto__", "constructor", "prototype"]);

export function wholeRecord<K extends v.GenericSchema<string, string>, V extends v.GenericSchema>(key: K, value: V) {
  const base = v.record(key, value);
  return v.pipe(
    // Typed as the record's input (configs and tests write them); checked below, by the record.
    // `record` lets a reader of schemas as data (runtime/util/schema-walk.ts) see the record.
    Object.assign(v.custom<v.InferInput<typeof base>>(() => true), { record: base }),
    v.rawTransform<v.InferInput<typeof base>, Record<v.InferOutput<K>, v.InferOutput<V>>>(({ dataset, addIssue, NEVER }) => {
      const input = dataset.value;
      const checked = v.safeParse(base, input);
      const issues: v.BaseIssue<unknown>[] = [...(checked.issues ?? [])];
      const special = new Map<string, unknown>();
      if (checked.success) {
        for (const k of Object.keys(input as object)) {
          if (!SKIPPED_BY_VALIBOT.has(k)) continue;
          const at = (origin: "key" | "value"): v.IssuePathItem => ({ type: "object", origin, input: input as Record<string, unknown>, key: k, value: (input as Record<string, unknown>)[k] });
          const keyCheck = v.safeParse(key, k);
          if (!keyCheck.success) for (const i of keyCheck.issues) issues.push({ ...i, path: [at("key")] });
          const valueCheck = v.safeParse(value, (input as Record<string, unknown>)[k]);
          if (!valueCheck.success) for (const i of valueCheck.issues) issues.push({ ...i, path: [at("value"), ...(i.path ?? [])] });
          else special.set(k, valueCheck.output);
        }
      }
      if (issues.length > 0 || !checked.success) {
        for (const i of issues) addIssue({ message: i.message, input: i.input, expected: i.expected ?? undefined, received: i.received, ...(i.path ? { path: i.path as [v.IssuePathItem, ...v.IssuePathItem[]] } : {}) });
        return NEVER;
      }
      if (special.size === 0) return checked.output as Record<v.InferOutput<K>, v.InferOutput<V>>;
      const whole: Record<string, unknown> = {};
      const kept = checked.output as Record<string, unknown>;
      for (const k of Object.keys(input as object)) {
        const own = special.has(k) ? special.get(k) : kept[k];
        Object.defineProperty(whole, k, { value: own, enumerable: true, writable: true, configurable: true });
      }
      return whole as Record<v.InferOutput<K>, v.InferOutput<V>>;
    }),
  );
}
