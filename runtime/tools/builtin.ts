// Built-in tools the model may call: a calculator and a clock. Small, deterministic (the clock uses
// the core's clock), and enough to exercise pre_tool_call / post_tool_call end to end.
import type { Tool } from "./registry.ts";

export function builtinTools(now: () => number): Tool[] {
  const tools: Tool[] = [
    {
      spec: {
        name: "calculator",
        description: "Evaluates an arithmetic expression with + - * / % and parentheses.",
        parameters: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] },
      },
      // A bad expression throws: the tool step reports it as status "error" (the model still reads
      // "error: ..."), so post_tool_call and the stats see a failure, not a result.
      run(args) {
        if (typeof args.expression !== "string") throw new Error("expression must be a string");
        return `${args.expression} = ${evaluate(args.expression)}`;
      },
    },
    {
      spec: { name: "clock", description: "Returns the current time (ISO 8601, UTC).", parameters: { type: "object", properties: {} } },
      run: () => new Date(now()).toISOString(),
    },
  ];
  return tools;
}

/** Recursive-descent arithmetic: no eval, bounded by the input length. */
export function evaluate(src: string): number {
  const tokens = src.match(/\d+(?:\.\d+)?|[-+*/%()]|\S/g) ?? [];
  let i = 0;
  const peek = () => tokens[i];
  const next = () => tokens[i++];
  const primary = (): number => {
    const t = next();
    if (t === "(") {
      const x = sum();
      if (next() !== ")") throw new Error("missing )");
      return x;
    }
    if (t === "-") return -primary();
    if (t === "+") return primary();
    if (t !== undefined && /^\d/.test(t)) return Number(t);
    throw new Error(`unexpected ${t ?? "end of input"}`);
  };
  const product = (): number => {
    let x = primary();
    while (peek() === "*" || peek() === "/" || peek() === "%") {
      const op = next();
      const y = primary();
      x = op === "*" ? x * y : op === "/" ? x / y : x % y;
    }
    return x;
  };
  const sum = (): number => {
    let x = product();
    while (peek() === "+" || peek() === "-") x = next() === "+" ? x + product() : x - product();
    return x;
  };
  const result = sum();
  if (i !== tokens.length) throw new Error(`unexpected ${tokens[i]}`);
  return result;
}
