// Stored messages as the provider sees them. Stored roles map one-to-one onto chat messages, so a
// provider that compacts "the first N messages" names exactly the first N stored rows.
import type { ChatMessage } from "../providers/types.ts";
import type { MessageRow } from "./view.ts";

export function rowToChat(m: Pick<MessageRow, "role" | "content" | "tool_name">): ChatMessage {
  switch (m.role) {
    case "user":
    case "assistant":
    case "system":
      return { role: m.role, content: m.content };
    case "summary":
      return { role: "system", content: `Summary of the earlier conversation: ${m.content}` };
    default: // tool results of earlier turns: their call ids are gone, so they are told as text
      return { role: "assistant", content: `[${m.tool_name ?? "tool"} returned] ${m.content}` };
  }
}

export const rowsToChat = (rows: ReadonlyArray<Pick<MessageRow, "role" | "content" | "tool_name">>) => rows.map(rowToChat);
