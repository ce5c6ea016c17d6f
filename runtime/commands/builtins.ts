// Built-in slash commands: /compress [kind] [--rotate], /exit [--delete], /commands.
import { COMPACTION_KINDS, type CompactionKind } from "../../hooks/catalogue.ts";
import type { CompactionEngine } from "../compaction/engine.ts";
import type { DeletionService } from "../deletion/service.ts";
import type { SessionService } from "../sessions/service.ts";
import { CommandError, type CommandCall, type CommandRegistry } from "./registry.ts";

function needSession(call: CommandCall, name: string): string {
  if (!call.session_id) throw new CommandError("failed", `/${name} needs a session (session_id)`);
  return call.session_id;
}

function flags(raw: string): { words: string[]; flags: Set<string> } {
  const parts = raw.split(/\s+/).filter(Boolean);
  return { words: parts.filter((p) => !p.startsWith("--")), flags: new Set(parts.filter((p) => p.startsWith("--"))) };
}

export function registerBuiltins(
  commands: CommandRegistry,
  deps: { sessions: SessionService; compaction: CompactionEngine; deletion: DeletionService },
): void {
  commands.register({
    name: "compress",
    description: "Compacts this session now: /compress [summarize|micro_summarize|prune_tool_results|provider_native] [--rotate]",
    wants: ["session_id"],
    async run(call) {
      const id = needSession(call, "compress");
      const { words, flags: f } = flags(call.raw_args);
      const kind = (words[0] ?? "summarize") as CompactionKind;
      if (!COMPACTION_KINDS.includes(kind) || words.length > 1 || [...f].some((x) => x !== "--rotate")) {
        throw new CommandError("failed", `usage: /compress [${COMPACTION_KINDS.join("|")}] [--rotate]`);
      }
      // Refused here as the command's own misuse (like a bad kind), not as an invalid HTTP body.
      if (f.has("--rotate") && kind !== "summarize") throw new CommandError("failed", `/compress --rotate applies to summarize only, not ${kind}`);
      const out = await deps.compaction.compact({ session_id: id, kind, reason: "manual", rotate: f.has("--rotate") });
      if (!out.compacted) return `nothing compacted (${out.skipped})`;
      const moved = out.old_session_id ? `; continue in session ${out.session_id}` : "";
      return `compacted ${out.before_tokens} -> ${out.after_tokens} tokens (${out.kind})${moved}`;
    },
  });
  commands.register({
    name: "exit",
    description: "Ends this session; /exit --delete also deletes it.",
    wants: ["session_id"],
    async run(call) {
      const id = needSession(call, "exit");
      const { words, flags: f } = flags(call.raw_args);
      if (words.length > 0 || [...f].some((x) => x !== "--delete")) throw new CommandError("failed", "usage: /exit [--delete]");
      await deps.sessions.end(id, "exit");
      if (!f.has("--delete")) return `session ${id} ended`;
      const res = await deps.deletion.remove({ reason: "delete", ids: [id] });
      const n = res.deleted_ids.length;
      return `session ${id} ended and deleted (${n} ${n === 1 ? "session" : "sessions"}, its cascade included)`;
    },
  });
  commands.register({
    name: "commands",
    description: "Lists the available slash commands.",
    run: () =>
      commands
        .list()
        .map((c) => `/${c.name}${c.plugin ? ` [${c.plugin}]` : ""}${c.sensitive ? " (sensitive)" : ""} — ${c.description}`)
        .join("\n"),
  });
}
