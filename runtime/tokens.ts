// Token estimate used for budgets and hook payloads: ~4 characters per token. Cheap, stable and
// good enough to decide when to compact; providers report real usage separately.
export const estimateTokens = (text: string): number => Math.ceil(text.length / 4);
