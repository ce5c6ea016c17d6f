// Issue 10 item 6: streamed turns (Accept: text/event-stream) through real HTTP, with a real WASM
// plugin (hostile/hookrec) seeing the same hooks as in a non-streamed turn; the OpenAI-compatible
// provider's own streaming against a small upstream; a client that disconnects mid-stream.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { command, HOSTILE_DIR, newSession, startPluginServer, type PluginServer } from "./helpers/plugins.ts";
import { allEvents, postStreamedTurn, sseEvents } from "./helpers/sse.ts";
import { startTestServer } from "./helpers/server.ts";
import { ProviderError, type Provider } from "../runtime/providers/types.ts";
import { LocalProvider } from "../runtime/providers/local.ts";

const hooksOf = async (s: PluginServer, sid: string) =>
  (JSON.parse((await command(s, "hookrec", {})).body.output) as any[]).filter((e) => e.session_id === sid).map((e) => e.hook);

describe("streamed turns with the local provider", () => {
  let s: PluginServer;
  before(async () => {
    s = await startPluginServer({ dir: HOSTILE_DIR, enabled: ["hookrec"], grants: { hookrec: ["kv"] } });
  });
  after(() => s.close());

  it("streams turn, tool_call, tool_result, text deltas and the answer; hooks fire as without streaming", async () => {
    const sid = await newSession(s);
    const res = await postStreamedTurn(s.url, sid, "calculate 2+3");
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    const events = await allEvents(res);
    const names = events.map((e) => e.event);
    assert.deepEqual(names.slice(0, 3), ["turn", "tool_call", "tool_result"]);
    assert.equal(names.at(-1), "answer");
    const deltas = events.filter((e) => e.event === "delta").map((e) => e.data.text);
    assert.ok(deltas.length > 1, "the answer arrives in several deltas");
    const answer = events.at(-1)!.data;
    assert.equal(deltas.join(""), answer.reply);
    assert.equal(events[0]!.data.turn_id, answer.turn_id);
    assert.deepEqual([events[2]!.data.tool_name, events[2]!.data.result, events[2]!.data.status], ["calculator", "2+3 = 5", "ok"]);
    // The same hooks, in the same order, as the non-streamed turn that follows.
    const streamed = await hooksOf(s, sid);
    const plain = await newSession(s);
    await s.api("POST", `/v1/sessions/${plain}/turns`, { message: "calculate 2+3" });
    assert.deepEqual(streamed, await hooksOf(s, plain));
    assert.deepEqual(streamed, ["on_session_start", "pre_llm_call", "pre_tool_call", "post_tool_call", "post_llm_call"]);
    const stored = (await s.api("GET", `/v1/sessions/${sid}/messages`)).body.messages.map((m: any) => m.role);
    assert.deepEqual(stored, ["user", "tool", "assistant"]);
  });

  // A client that did not read held one queued event per word on the server (5 MB for a 100 kB answer).
  it("deltas a slow client has not taken yet are joined: fewer events, the same text", async () => {
    const sid = await newSession(s);
    const message = Array.from({ length: 14_000 }, (_, i) => `w${i}`).join(" ");
    const res = await postStreamedTurn(s.url, sid, message);
    assert.equal(res.status, 200);
    await new Promise((r) => setTimeout(r, 1_500)); // the turn runs while nothing is read
    const events = await allEvents(res);
    const deltas = events.filter((e) => e.event === "delta").map((e) => e.data.text as string);
    const reply = events.at(-1)!.data.reply as string;
    assert.equal(deltas.join(""), reply);
    assert.ok(reply.split(" ").length > 14_000, "the local provider streams the message back word by word");
    assert.ok(deltas.length < 7_000, `${deltas.length} delta events for ${reply.split(" ").length} words`);
  });

  it("an Idempotency-Key retry of a streamed turn replays the stream as a stream; a plain request with that key is another request", async () => {
    const sid = await newSession(s);
    const post = (accept: string) =>
      fetch(`${s.url}/v1/sessions/${sid}/turns`, {
        method: "POST",
        headers: { "content-type": "application/json", accept, "idempotency-key": `sse-${sid}` },
        body: JSON.stringify({ message: "hello" }),
      });
    const first = await allEvents(await post("text/event-stream"));
    const retry = await post("text/event-stream");
    assert.equal(retry.headers.get("idempotent-replay"), "true");
    assert.match(retry.headers.get("content-type") ?? "", /^text\/event-stream/);
    assert.deepEqual(await allEvents(retry), first);
    const plain = await post("application/json");
    assert.equal(plain.status, 422, "the same key for the JSON representation is refused, not answered with event-stream text");
    assert.equal(((await plain.json()) as any).error.code, "idempotency_key_reused");
    assert.equal((await s.api("GET", `/v1/sessions/${sid}/messages`)).body.messages.length, 2, "the turn ran once");
  });

  // Found by an outside probe: a streamed turn that failed (database down, session_busy) kept its
  // Idempotency-Key and replayed the failure for a day, on every node, where a plain one gives it back.
  it("a streamed turn that fails as a plain turn would with a 5xx gives its Idempotency-Key back: the retry runs the turn", async () => {
    const local = new LocalProvider();
    let down = true;
    const flaky: Provider = {
      name: "flaky",
      model: local.model,
      complete: (req, stream) => (down ? Promise.reject(new Error("upstream went away")) : local.complete(req, stream)),
      summarize: (msgs) => local.summarize(msgs),
    };
    const f = await startTestServer({ provider: flaky });
    try {
      const fid = (await f.api("POST", "/v1/sessions", {})).body.session.id as string;
      const post = () =>
        fetch(`${f.url}/v1/sessions/${fid}/turns`, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream", "idempotency-key": `flaky-${fid}` }, body: JSON.stringify({ message: "hello" }) });
      const failed = await allEvents(await post());
      assert.deepEqual(failed.map((e) => e.event), ["turn", "error"]);
      down = false;
      let retry = await post();
      // The key is given back once the failed stream has ended: a retry at once may still wait on it.
      for (let i = 0; retry.headers.get("idempotent-replay") === "true" && i < 50; i++) {
        await retry.body?.cancel();
        await new Promise((r) => setTimeout(r, 20));
        retry = await post();
      }
      assert.equal(retry.headers.get("idempotent-replay"), null, "not a replay of the failure");
      assert.deepEqual((await allEvents(retry)).map((e) => e.event).at(-1), "answer");
      assert.equal((await f.api("GET", `/v1/sessions/${fid}/messages`)).body.messages.length, 2, "the turn ran, once");
    } finally {
      await f.close();
    }
  });

  // Found by an outside probe: "text/event-stream;q=0" (not this one, RFC 9110) still got a stream.
  it("Accept weighs text/event-stream: q=0 refuses it (JSON answer), any other weight asks for it", async () => {
    const sid = await newSession(s);
    const post = (accept: string) => fetch(`${s.url}/v1/sessions/${sid}/turns`, { method: "POST", headers: { "content-type": "application/json", accept }, body: JSON.stringify({ message: "hello" }) });
    for (const [accept, type] of [
      ["text/event-stream;q=0, application/json", /^application\/json/],
      ["application/json, text/event-stream ; q=0.0", /^application\/json/],
      ["application/json;q=0.5, text/event-stream;q=0.8", /^text\/event-stream/],
      ["TEXT/EVENT-STREAM", /^text\/event-stream/],
    ] as const) {
      const res = await post(accept);
      assert.equal(res.status, 200, accept);
      assert.match(res.headers.get("content-type") ?? "", type, accept);
      await res.body?.cancel();
    }
  });

  it("a turn that fails is an error event, and stores nothing; bad input, a missing or an ended session stay plain 4xx", async () => {
    // The model call fails once the turn runs: the stream's error event.
    const broken: Provider = {
      name: "broken",
      model: "broken",
      complete: () => Promise.reject(new ProviderError("the model is down")),
      summarize: () => Promise.reject(new ProviderError("the model is down")),
    };
    const b = await startTestServer({ provider: broken });
    try {
      const bid = (await b.api("POST", "/v1/sessions", {})).body.session.id as string;
      const events = await allEvents(await postStreamedTurn(b.url, bid, "hello"));
      assert.deepEqual(events.map((e) => e.event), ["turn", "error"]);
      assert.equal((await b.api("GET", `/v1/sessions/${bid}/messages`)).body.messages.length, 0, "nothing stored");
    } finally {
      await b.close();
    }
    // An ended session is refused before any stream, as a turn not streamed is (it was an error event).
    const sid = await newSession(s);
    await s.api("POST", `/v1/sessions/${sid}/end`, {});
    const ended = await postStreamedTurn(s.url, sid, "hello");
    assert.equal(ended.status, 409);
    assert.equal(((await ended.json()) as { error: { code: string } }).error.code, "session_ended");
    const missing = await postStreamedTurn(s.url, "s_nope", "hello");
    assert.equal(missing.status, 404);
    await missing.body?.cancel();
    const bad = await fetch(`${s.url}/v1/sessions/${sid}/turns`, { method: "POST", headers: { accept: "text/event-stream", "content-type": "application/json" }, body: "{}" });
    assert.equal(bad.status, 400);
    await bad.body?.cancel();
    // A /command streams only its answer: an unknown one is a plain 404, as without streaming (it
    // was a 200 stream with an error event; an outside probe); a known one is its answer event.
    const open = await newSession(s);
    const unknown = await postStreamedTurn(s.url, open, "/nosuch");
    assert.equal(unknown.status, 404);
    assert.equal(((await unknown.json()) as { error: { code: string } }).error.code, "unknown_command");
    const known = await allEvents(await postStreamedTurn(s.url, open, "/commands"));
    assert.deepEqual(known.map((e) => e.event), ["answer"]);
    assert.equal((known[0]!.data as { type: string }).type, "command");
  });
});

describe("streamed turns with the OpenAI-compatible provider", () => {
  let upstream: Server;
  let s: PluginServer;
  const requests: any[] = [];
  /** Per request: the chunks to send; `hold` pauses before the rest until released. */
  let plan: (body: any) => { chunks: object[]; hold?: Promise<void> };

  const chunk = (content: string) => ({ choices: [{ delta: { content } }] });
  before(async () => {
    upstream = createServer((req, res: ServerResponse) => {
      let data = "";
      req.on("data", (c) => (data += c));
      req.on("end", async () => {
        const body = JSON.parse(data);
        requests.push(body);
        if (!body.stream) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ choices: [{ message: { role: "assistant", content: "not streamed" } }] }));
          return;
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        const { chunks, hold } = plan(body);
        const [first, ...rest] = chunks;
        res.write(`data: ${JSON.stringify(first)}\n\n`);
        await hold;
        for (const c of rest) res.write(`data: ${JSON.stringify(c)}\n\n`);
        res.end("data: [DONE]\n\n");
      });
    });
    await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
    const port = (upstream.address() as AddressInfo).port;
    s = await startPluginServer(
      { dir: HOSTILE_DIR, enabled: ["hookrec"], grants: { hookrec: ["kv"] } },
      { config: { provider: { type: "openai", base_url: `http://127.0.0.1:${port}/v1`, model: "stream-model" } } },
    );
  });
  after(async () => {
    await s.close();
    upstream.closeAllConnections();
    await new Promise<void>((r) => upstream.close(() => r()));
  });

  it("passes the upstream's deltas through as they come, with its usage and tool calls", async () => {
    // The first model call streams a tool call in pieces; the one after the tool result streams text.
    plan = (body) =>
      body.messages.at(-1).role === "tool"
        ? { chunks: [chunk("one "), chunk("two "), chunk("three"), { choices: [], usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 } }] }
        : {
            chunks: [
              { choices: [{ delta: { tool_calls: [{ index: 0, id: "c1", function: { name: "calcu", arguments: '{"expr' } }] } }] },
              { choices: [{ delta: { tool_calls: [{ index: 0, function: { name: "lator", arguments: 'ession":"1+1"}' } }] } }] },
            ],
          };
    const sid = await newSession(s);
    const events = await allEvents(await postStreamedTurn(s.url, sid, "add"));
    assert.deepEqual(events.filter((e) => e.event === "tool_call").map((e) => [e.data.tool_name, e.data.args]), [["calculator", { expression: "1+1" }]]);
    assert.equal(requests.at(-1).stream, true);
    assert.deepEqual(requests.at(-1).stream_options, { include_usage: true });
    const deltas = events.filter((e) => e.event === "delta").map((e) => e.data.text);
    assert.deepEqual(deltas, ["one ", "two ", "three"]);
    const answer = events.at(-1)!;
    assert.equal(answer.event, "answer");
    assert.equal(answer.data.reply, "one two three");
    assert.deepEqual(answer.data.tool_calls.map((t: any) => [t.tool_name, t.args, t.result]), [["calculator", { expression: "1+1" }, "1+1 = 2"]]);
    assert.equal(answer.data.usage.total_tokens, 8);
    // A plain turn does not ask the upstream to stream.
    const plain = await s.api("POST", `/v1/sessions/${sid}/turns`, { message: "again" });
    assert.equal(plain.body.reply, "not streamed");
    assert.equal(requests.at(-1).stream, undefined);
  });

  it("a client that disconnects mid-stream leaves the whole exchange stored and the hooks fired", async () => {
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    plan = () => ({ chunks: [chunk("partial "), chunk("answer")], hold });
    const sid = await newSession(s);
    const res = await postStreamedTurn(s.url, sid, "tell me");
    for await (const e of sseEvents(res)) if (e.event === "delta") break; // leaving the loop cancels the body
    release();
    // The session lock orders the next turn after the abandoned one has finished.
    const next = await s.api("POST", `/v1/sessions/${sid}/turns`, { message: "next" });
    assert.equal(next.status, 200);
    const stored = (await s.api("GET", `/v1/sessions/${sid}/messages`)).body.messages.map((m: any) => [m.role, m.content]);
    assert.deepEqual(stored, [["user", "tell me"], ["assistant", "partial answer"], ["user", "next"], ["assistant", "not streamed"]]);
    assert.deepEqual(await hooksOf(s, sid), ["on_session_start", "pre_llm_call", "post_llm_call", "pre_llm_call", "post_llm_call"]);
  });
});
