// Issue 10 items 4 and 8: durable system-prompt sections through real HTTP and real WASM plugins
// (text-stats declares one in its manifest; memory-reinject sets one with /conventions through its
// KV), seen by an OpenAI-compatible upstream in every model call, before and after compactions.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { TEST_DBS } from "./helpers/dialects.ts";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { command, newSession, SEED_DIR, startPluginServer, type PluginServer } from "./helpers/plugins.ts";
import { seed, words } from "./helpers/seed.ts";

for (const db of TEST_DBS) {
  describe(`durable system-prompt sections [${db}]`, () => {
    let upstream: Server;
    let s: PluginServer;
    const requests: any[] = [];
    before(async () => {
      upstream = createServer((req, res) => {
        let data = "";
        req.on("data", (c) => (data += c));
        req.on("end", () => {
          const body = JSON.parse(data);
          requests.push(body);
          const summary = body.messages[0]?.content?.startsWith("Summarize the conversation");
          // "compact N": the gateway compacted the first N messages of this request itself.
          const native = /^compact (\d+)$/.exec(body.messages.at(-1)?.content ?? "");
          res.writeHead(200, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              choices: [{ message: { role: "assistant", content: summary ? "short summary" : "ok" } }],
              ...(native ? { compaction: { summary: "gateway summary", replaced: Number(native[1]) } } : {}),
            }),
          );
        });
      });
      await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
      const port = (upstream.address() as AddressInfo).port;
      s = await startPluginServer(
        { dir: SEED_DIR, enabled: ["text-stats", "memory-reinject"], grants: { "memory-reinject": ["kv"] } },
        { db, config: { provider: { type: "openai", base_url: `http://127.0.0.1:${port}/v1`, model: "m" }, compaction: { keep_recent_messages: 1, cooldown_seconds: 0 } } },
      );
    });
    after(async () => {
      await s.close();
      upstream.closeAllConnections();
      await new Promise<void>((r) => upstream.close(() => r()));
    });

    const systemOf = (body: any) => (body.messages[0].role === "system" ? body.messages[0].content : null);

    it("a manifest section leads every model call; /conventions makes memory-reinject's durable; both survive compaction", async () => {
      const sid = await newSession(s, "ops");
      await s.api("POST", `/v1/sessions/${sid}/turns`, { message: "hello" });
      assert.match(systemOf(requests.at(-1)), /^When the user asks how long a text is, call the text_stats tool/);
      assert.doesNotMatch(systemOf(requests.at(-1)), /Project conventions/);

      await command(s, "conventions", { session_id: sid, raw_args: "Tabs, not spaces." });
      await s.api("POST", `/v1/sessions/${sid}/turns`, { message: "again" });
      const sections = systemOf(requests.at(-1));
      // Plugin name order: memory-reinject, then text-stats.
      assert.match(sections, /^Project conventions: Tabs, not spaces\.\n\nWhen the user asks how long a text is/);

      // A rotating summarize: the next turn runs in the new session, with the same sections and
      // without a re-injection of the conventions (they never left the prompt).
      await seed(s.core, sid, [["user", words(200, "a")], ["assistant", words(200, "b")], ["user", words(50, "c")]]);
      const rot = await s.api("POST", `/v1/sessions/${sid}/compress`, { kind: "summarize", rotate: true });
      assert.equal(rot.body.compacted, true, JSON.stringify(rot.body));
      const summarizer = requests.at(-1);
      assert.match(summarizer.messages[0].content, /^Summarize the conversation/, "the summarizer call is not a session model call");
      const next = await s.api("POST", `/v1/sessions/${rot.body.session_id}/turns`, { message: "after" });
      assert.equal(next.status, 200);
      assert.equal(systemOf(requests.at(-1)), sections);
      assert.deepEqual(next.body.injected, []);
      // The stored conversation holds no copy of the sections.
      const stored = (await s.api("GET", `/v1/sessions/${rot.body.session_id}/messages`)).body.messages;
      assert.ok(stored.every((m: any) => !m.content.includes("Tabs, not spaces")));
    });

    // An outside probe's finding: the gateway counts its request's messages, sections included; taken
    // as stored rows, one row more than it summarized was deleted (the answer before the last question).
    it("a gateway's native compaction removes the stored rows it replaced, not counting the sections", async () => {
      const sid = await newSession(s);
      const [q1, a1] = [words(40, "q"), words(40, "a")]; // longer than the summary: it shortens the history
      await seed(s.core, sid, [["user", q1], ["assistant", a1], ["user", "q2"], ["assistant", "a2"]]);
      // Its request: [sections, q1, a1, q2, a2, "compact 3"]: the sections, q1 and a1 are replaced.
      const res = await s.api("POST", `/v1/sessions/${sid}/turns`, { message: "compact 3" });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(systemOf(requests.at(-1)) !== null, true, "the request led with the sections");
      assert.deepEqual(res.body.compactions.map((c: any) => [c.kind, c.messages_removed]), [["provider_native", 2]]);
      const stored = (await s.api("GET", `/v1/sessions/${sid}/messages`)).body.messages.map((m: any) => [m.role, m.content]);
      assert.deepEqual(stored, [["summary", "gateway summary"], ["user", "q2"], ["assistant", "a2"], ["user", "compact 3"], ["assistant", "ok"]]);
    });

    it("a disabled plugin's section is gone from the next call", async () => {
      await s.api("POST", "/v1/plugins/text-stats/disable", {});
      const sid = await newSession(s);
      await s.api("POST", `/v1/sessions/${sid}/turns`, { message: "hi" });
      assert.equal(systemOf(requests.at(-1)), "Project conventions: Tabs, not spaces.");
      await s.api("POST", "/v1/plugins/text-stats/enable", {});
    });
  });
}
