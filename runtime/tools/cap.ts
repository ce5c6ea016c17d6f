// The size cap on a tool result the model sees: cut on a UTF-8 character boundary, with a note
// saying how much was left out (a plugin tool must not flood the model's context).
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function capResult(result: string, maxBytes: number): { text: string; truncated: boolean } {
  if (result.length * 3 <= maxBytes) return { text: result, truncated: false };
  const bytes = encoder.encode(result);
  if (bytes.length <= maxBytes) return { text: result, truncated: false };
  let end = maxBytes;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // not inside a multi-byte character
  return { text: `${decoder.decode(bytes.subarray(0, end))}\n[tool result truncated: ${bytes.length - end} of ${bytes.length} bytes left out]`, truncated: true };
}
