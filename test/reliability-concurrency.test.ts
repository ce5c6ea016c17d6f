// Concurrency over real HTTP with real WASM plugins (counter, memory-reinject, sidecar-index):
// parallel turns on one session, compactions racing deletes (and turns), overlapping bulk deletes,
// concurrent retries of one Idempotency-Key. No message lost or doubled, every
// on_session_delete/post_compaction fired exactly once per committed change, the database
// consistent, and the counter plugin saw every event (events lost: 0).
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { startPluginServer, type PluginServer } from "./helpers/plugins.ts";
import { recordHooks, type HookRecorder } from "./helpers/hooks.ts";
import { inconsistencies, rowCounts } from "./helpers/db-check.ts";
import { lostEvents } from "./helpers/event-count.ts";
import { pluginDir, type PluginDir } from "./helpers/plugin-dir.ts";
import { seed, words } from "./helpers/seed.ts";

describe("reliability: concurrency", () => {
  let s: PluginServer;
  let rec: HookRecorder;
  let dir: PluginDir;
  let operations = 0;

  before(async () => {
    dir = pluginDir(["memory-reinject", "sidecar-index"], ["counter"]);
    const enabled = ["counter", "memory-reinject", "sidecar-index"];
    s = await startPluginServer(
      { dir: dir.path, enabled, grants: Object.fromEntries(enabled.map((n) => [n, ["kv"]])) },
      { config: { compaction: { keep_recent_messages: 2 } }, before: (core) => void (rec = recordHooks(core.dispatcher)) },
    );
  });
  after(async () => {
    console.log(`# reliability concurrency: ${operations} concurrent operations`);
    await s.close();
    dir.remove();
  });

  /** Runs requests at once; counts them as concurrent operations. */
  function together<T>(ops: Array<() => Promise<T>>): Promise<T[]> {
    operations += ops.length;
    return Promise.all(ops.map((op) => op()));
  }
  const create = async (body: object = {}) => {
    const res = await s.api("POST", "/v1/sessions", body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.session.id as string;
  };
  const consistent = async () => {
    await s.plugins.flush();
    assert.deepEqual(await inconsistencies(s.core.storage.db), []);
  };
  const since = (mark: number, hook: string) => rec.events.slice(mark).filter((e) => e.hook === hook) as any[];

  it("parallel turns on one session: every message stored once, in pairs, every hook fired once per turn", async () => {
    const sid = await create({ source: { user_id: "u" } });
    const mark = rec.events.length;
    const N = 30;
    const texts = Array.from({ length: N }, (_, i) => (i % 3 === 0 ? `calc ${i}+1` : `message ${i}`));
    const replies = await together(texts.map((m) => () => s.api("POST", `/v1/sessions/${sid}/turns`, { message: m })));
    for (const r of replies) assert.equal(r.status, 200, JSON.stringify(r.body));
    const msgs = (await s.api("GET", `/v1/sessions/${sid}/messages`)).body.messages as Array<{ seq: number; role: string; content: string }>;
    // One turn at a time per session: each user message is followed by its own tool/assistant rows.
    const users = msgs.filter((m) => m.role === "user").map((m) => m.content);
    assert.deepEqual([...users].sort(), [...texts].sort(), "every user message exactly once");
    assert.deepEqual(msgs.map((m) => m.seq), msgs.map((_, i) => i + 1), "seq has no gap and no duplicate");
    for (let i = 0; i < msgs.length; i++) {
      if (msgs[i]!.role !== "user") continue;
      const text = msgs[i]!.content;
      const next = msgs[i + 1]!;
      if (text.startsWith("calc")) {
        assert.equal(next.role, "tool", text);
        assert.equal(msgs[i + 2]!.role, "assistant", text);
      } else assert.deepEqual([next.role, next.content], ["assistant", `You said: ${text}`]);
    }
    assert.equal(since(mark, "pre_llm_call").length, N);
    assert.equal(since(mark, "post_llm_call").length, N);
    assert.equal(since(mark, "post_tool_call").length, texts.filter((t) => t.startsWith("calc")).length);
    await consistent();
  });

  it("parallel turns across sessions interleave without mixing their histories", async () => {
    const ids = await Promise.all(Array.from({ length: 8 }, (_, i) => create({ profile: `p${i}` })));
    await together(ids.flatMap((id) => Array.from({ length: 5 }, (_, k) => () => s.api("POST", `/v1/sessions/${id}/turns`, { message: `${id} #${k}` }))));
    for (const id of ids) {
      const msgs = (await s.api("GET", `/v1/sessions/${id}/messages`)).body.messages as Array<{ role: string; content: string }>;
      assert.equal(msgs.length, 10);
      for (const m of msgs) assert.ok(m.content.includes(id), `${id} got a foreign message: ${m.content}`);
    }
    await consistent();
  });

  it("a compaction racing a delete (and a turn): the delete wins or follows, nothing resurrected, hooks exactly once", async () => {
    const N = 24;
    const ids = await Promise.all(Array.from({ length: N }, () => create({ profile: "race" })));
    for (const id of ids) await seed(s.core, id, [["user", words(200, "a")], ["assistant", words(200, "b")], ["user", words(200, "c")], ["assistant", words(200, "d")], ["user", "e"], ["assistant", "f"]]);
    const mark = rec.events.length;
    const results = await together(
      ids.flatMap((id, i) => [
        async () => ({ id, op: "compress", res: await s.api("POST", `/v1/sessions/${id}/compress`, i % 3 === 2 ? { kind: "micro_summarize" } : { kind: "summarize", rotate: i % 2 === 0 }) }),
        async () => ({ id, op: "delete", res: await s.api("DELETE", `/v1/sessions/${id}`) }),
        async () => ({ id, op: "turn", res: await s.api("POST", `/v1/sessions/${id}/turns`, { message: "racing" }) }),
      ]),
    );
    const compacted = new Map<string, any>();
    for (const { id, op, res } of results) {
      assert.ok(res.status < 500, `${op} ${id}: ${res.status} ${JSON.stringify(res.body)}`);
      if (op === "delete") {
        assert.equal(res.status, 200, `delete ${id}: ${JSON.stringify(res.body)}`);
        assert.ok(res.body.deleted_ids.includes(id));
      }
      if (op === "compress" && res.status === 200) {
        if (res.body.compacted) compacted.set(id, res.body);
        else assert.ok(["gone", "empty"].includes(res.body.skipped), JSON.stringify(res.body));
      }
    }
    // A turn either ran, found the session deleted, or came after a rotating compaction had ended it.
    for (const { id, op, res } of results) {
      if (op !== "turn") continue;
      const rotatedAway = compacted.get(id)?.old_session_id === id && res.status === 409 && res.body.error?.code === "session_ended";
      assert.ok(res.status === 200 || res.status === 404 || rotatedAway, `turn ${id}: ${res.status} ${JSON.stringify(res.body)}`);
    }
    // post_compaction: exactly one per compaction that committed, none for the others.
    const post = since(mark, "post_compaction");
    const fromCompress = post.filter((e) => e.reason === "manual");
    assert.equal(fromCompress.length, compacted.size);
    for (const e of fromCompress) {
      const origin = e.old_session_id || e.session_id;
      assert.equal(compacted.get(origin)?.session_id, e.session_id, `post_compaction for ${origin} without a compacted answer`);
    }
    // on_session_delete: one per delete, and each covers the rotated successor when there was one.
    const dels = since(mark, "on_session_delete");
    assert.equal(dels.length, N);
    const deleted = dels.flatMap((e) => e.deleted_ids as string[]);
    assert.equal(new Set(deleted).size, deleted.length, "an id was reported deleted twice");
    for (const [id, out] of compacted) {
      assert.ok(deleted.includes(id));
      if (out.old_session_id) assert.ok(deleted.includes(out.session_id), `rotated successor ${out.session_id} of ${id} survived`);
    }
    const left = await rowCounts(s.core.storage.db, [...ids, ...[...compacted.values()].map((o) => o.session_id)]);
    assert.deepEqual(left, { sessions: 0, messages: 0, kv: 0 });
    await consistent();
  });

  it("overlapping bulk deletes, profile deletes and single deletes: every id removed and reported exactly once", async () => {
    const roots: string[] = [];
    const all: string[] = [];
    for (let i = 0; i < 12; i++) {
      const root = await create({ profile: "bulk" });
      const c1 = await create({ parent_session_id: root });
      const c2 = await create({ parent_session_id: c1 });
      await seed(s.core, root, [["user", words(100)], ["assistant", words(100)], ["user", "x"], ["assistant", "y"], ["user", "z"]]);
      roots.push(root);
      all.push(root, c1, c2);
    }
    // Rotate a few so the compaction chain is part of the cascade.
    for (const root of roots.slice(0, 4)) {
      const r = await s.api("POST", `/v1/sessions/${root}/compress`, { rotate: true });
      assert.equal(r.body.compacted, true, JSON.stringify(r.body));
      all.push(r.body.session_id);
    }
    const bystander = await create({ profile: "bystander" });
    await seed(s.core, bystander, [["user", "keep me"]]); // not empty: empty_sweep must leave it
    const mark = rec.events.length;
    const slices = [all.slice(0, 20), all.slice(10, 30), all.slice(25), [...all].reverse().slice(0, 15), roots];
    const responses = await together([
      ...slices.map((ids) => () => s.api("POST", "/v1/sessions/bulk-delete", { ids })),
      () => s.api("POST", "/v1/sessions/bulk-delete", { profile: "bulk" }),
      () => s.api("POST", "/v1/sessions/bulk-delete", { profile: "bulk" }),
      ...roots.slice(0, 6).map((id) => () => s.api("DELETE", `/v1/sessions/${id}`)),
      () => s.api("POST", "/v1/maintenance/ghost_prune", {}),
      () => s.api("POST", "/v1/maintenance/empty_sweep", { grace_seconds: 0 }),
    ]);
    const reported: string[] = [];
    let fired = 0;
    for (const r of responses) {
      assert.ok(r.status === 200 || r.status === 404, `${r.status} ${JSON.stringify(r.body)}`);
      if (r.status === 200) {
        reported.push(...r.body.deleted_ids);
        if (r.body.deleted_ids.length > 0) fired++;
      }
    }
    assert.deepEqual([...reported].sort(), [...all].sort(), "each id reported by exactly one operation");
    const dels = since(mark, "on_session_delete");
    assert.equal(dels.length, fired, "one on_session_delete per operation that removed something");
    assert.deepEqual(dels.flatMap((e) => e.deleted_ids).sort(), [...all].sort());
    assert.deepEqual(await rowCounts(s.core.storage.db, all), { sessions: 0, messages: 0, kv: 0 });
    assert.equal((await s.api("GET", `/v1/sessions/${bystander}`)).status, 200);
    await consistent();
  });

  it("a delete that commits while post_compaction is still fanning out leaves no plugin KV row behind", async () => {
    // memory-reinject writes session-scoped KV on post_compaction. A subscriber that sorts first
    // ("!gate") deletes the session in between: the plugin then writes KV for a session that is gone.
    const sid = await create({ profile: "late" });
    await seed(s.core, sid, [["user", words(200, "a")], ["assistant", words(200, "b")], ["user", "c"], ["assistant", "d"], ["user", "e"]]);
    let deleted: string[] = [];
    s.core.dispatcher.subscribe({
      name: "!gate",
      hooks: new Set(["post_compaction"] as const),
      call: async (d) => {
        if ((d.payload as { session_id: string }).session_id === sid) deleted = (await s.core.deletion.remove({ reason: "delete", ids: [sid] })).deleted_ids;
        return {};
      },
    });
    try {
      operations += 2;
      const res = await s.api("POST", `/v1/sessions/${sid}/compress`, { kind: "summarize" });
      assert.equal(res.body.compacted, true, JSON.stringify(res.body));
    } finally {
      s.core.dispatcher.unsubscribe("!gate");
    }
    assert.deepEqual(deleted, [sid]);
    await consistent();
    assert.deepEqual(await rowCounts(s.core.storage.db, [sid]), { sessions: 0, messages: 0, kv: 0 });
  });

  it("an Idempotency-Key answer the database does not take at once reaches the client, is stored later, and a retry replays it", async () => {
    const id = await create();
    const mark = rec.events.length;
    const storage = s.core.storage as { write: typeof s.core.storage.write };
    const real = storage.write;
    let writes = 0;
    // The claim, the delete, then the answer: only the third write fails.
    storage.write = ((fn: Parameters<typeof real>[0]) => (++writes === 3 ? Promise.reject(new Error("database went away")) : real.call(s.core.storage, fn))) as typeof real;
    let first;
    try {
      first = await s.api("DELETE", `/v1/sessions/${id}`, undefined, { "idempotency-key": `lost-${id}` });
    } finally {
      storage.write = real;
    }
    assert.deepEqual([first.status, first.body], [200, { deleted_ids: [id] }], "the operation's own answer, not a 5xx");
    await new Promise((r) => setTimeout(r, 1_500));
    const retry = await s.api("DELETE", `/v1/sessions/${id}`, undefined, { "idempotency-key": `lost-${id}` });
    assert.deepEqual([retry.status, retry.body], [200, first.body]);
    assert.equal(retry.headers.get("idempotent-replay"), "true");
    assert.equal(since(mark, "on_session_delete").length, 1, "ran once");
  });

  it("concurrent retries of one Idempotency-Key run the operation once", async () => {
    const id = await create();
    const mark = rec.events.length;
    const res = await together(Array.from({ length: 12 }, () => () => s.api("DELETE", `/v1/sessions/${id}`, undefined, { "idempotency-key": `del-${id}` })));
    for (const r of res) assert.deepEqual([r.status, r.body], [200, { deleted_ids: [id] }]);
    assert.equal(res.filter((r) => r.headers.get("idempotent-replay") === "true").length, 11);
    assert.equal(since(mark, "on_session_delete").length, 1);
    const turns = await (async () => {
      const sid = await create();
      const out = await together(Array.from({ length: 8 }, () => () => s.api("POST", `/v1/sessions/${sid}/turns`, { message: "once" }, { "idempotency-key": `turn-${sid}` })));
      return { sid, out };
    })();
    assert.equal(new Set(turns.out.map((r) => JSON.stringify(r.body))).size, 1);
    assert.equal((await s.api("GET", `/v1/sessions/${turns.sid}/messages`)).body.messages.length, 2);
    await consistent();
  });

  it("the counter plugin saw every event emitted meanwhile (events lost: 0)", async () => {
    const { lost, emitted } = await lostEvents(s, rec);
    console.log(`# reliability concurrency: ${emitted} events emitted, lost ${JSON.stringify(lost)}`);
    assert.deepEqual(lost, {});
    const stats = (await s.api("GET", "/v1/plugins/counter")).body.plugin.stats;
    assert.equal(stats.calls, stats.ok, JSON.stringify(stats.failures));
  });
});
