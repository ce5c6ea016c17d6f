// Reads a server-sent event stream from fetch, event by event, so a test can stop (disconnect)
// after any event.
export interface SseEvent {
  event: string;
  data: any;
}

export async function* sseEvents(res: Response): AsyncGenerator<SseEvent> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const lines = block.split("\n");
        const event = lines.find((l) => l.startsWith("event:"))?.slice(6).trim() ?? "message";
        const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
        if (data !== "") yield { event, data: JSON.parse(data) };
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** POSTs a streamed turn; returns the response (check status and content-type before reading). */
export function postStreamedTurn(url: string, sessionId: string, message: string): Promise<Response> {
  return fetch(`${url}/v1/sessions/${sessionId}/turns`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ message }),
  });
}

export async function allEvents(res: Response): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const e of sseEvents(res)) out.push(e);
  return out;
}
