// Cross-cutting HTTP guards: requests plugins make refused, bearer token, and Idempotency-Key replay
// for mutating requests.
import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { PLUGIN_REQUEST_HEADER } from "../../host-api/request-mark.ts";
import { isLoopback } from "../config.ts";
import type { Core } from "../core.ts";
import { log } from "../log.ts";
import type { InFlight } from "../util/in-flight.ts";
import { KeyedMutex } from "../util/mutex.ts";
import { asksForRetry, errorBody } from "./errors.ts";
import { streamFailure, wantsEventStream } from "./turn-stream.ts";

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * A request a plugin made through its http: grant (the host marks each one, host-api/functions.ts)
 * gets 403 on every route: a grant of 127.0.0.1 or a LAN host would otherwise reach this API, with
 * no token on loopback, and act as the operator (read any session, disable plugins, delete).
 */
export const refusePluginRequests: MiddlewareHandler = async (c, next) => {
  const plugin = c.req.header(PLUGIN_REQUEST_HEADER);
  if (plugin === undefined) return next();
  return c.json(errorBody("plugin_request", `hookbox's API does not answer requests plugins make (this one from plugin "${plugin.slice(0, 64)}")`), 403);
};

/**
 * A page on any site the operator visits can make the browser send a "simple" request (a POST of
 * text/plain or of a form) to a server on loopback without asking it first, and through DNS
 * rebinding (a name of its own that resolves to 127.0.0.1) read the answers as if it were this
 * server's own page (an outside probe deleted sessions and read messages so). Browsers name the
 * page a request comes from: one from another origin (Origin, Sec-Fetch-Site) is refused; and a
 * server without a token, which binds to loopback only, answers only loopback names in Host, which
 * a rebound name is not. Clients that are not browsers send neither header.
 */
export function sameOriginOnly(tokenless: boolean): MiddlewareHandler {
  return async (c, next) => {
    const host = c.req.header("host");
    if (tokenless && host !== undefined && !isLoopback(hostnameOf(host))) {
      return c.json(errorBody("forbidden_host", `Host ${JSON.stringify(host.slice(0, 100))} is not a loopback name: a server without api_token answers localhost, 127.0.0.1 and [::1] only`), 403);
    }
    // Reads are answered: a page of another site cannot read the answer (no CORS), and a link to
    // /docs is a navigation from another site. A browser that names the site (Sec-Fetch-Site) is
    // taken at its word, so a proxy that rewrites Host does not turn same-origin requests away; one
    // that does not is judged by Origin against Host.
    if (c.req.method === "GET" || c.req.method === "HEAD" || c.req.method === "OPTIONS") return next();
    const site = c.req.header("sec-fetch-site");
    const origin = c.req.header("origin");
    const foreign = site !== undefined ? site !== "same-origin" && site !== "none" : origin !== undefined && !sameOrigin(origin, host);
    if (foreign) {
      return c.json(errorBody("cross_origin", `requests from another origin (${JSON.stringify((origin ?? site ?? "").slice(0, 100))}) are refused: hookbox's API is not for pages of other sites`), 403);
    }
    return next();
  };
}

/** "name:port", "[v6]:port" or a bare name, as the host name alone, lower-cased. */
function hostnameOf(host: string): string {
  const name = host.startsWith("[") ? host.slice(1, host.indexOf("]")) : host.replace(/:\d*$/, "");
  return name.toLowerCase().replace(/\.$/, "");
}

function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    return new URL(origin).host === new URL(`http://${host}`).host;
  } catch {
    return false; // "null" (a sandboxed page, a file) or garbage
  }
}

/** With a configured token every endpoint wants `Authorization: Bearer <token>` (the scheme in any case, RFC 7235). */
export function bearerAuth(token: string | undefined): MiddlewareHandler {
  const want = token ? digest(token) : undefined;
  return async (c, next) => {
    if (!want) return next();
    const header = c.req.header("authorization") ?? "";
    const scheme = /^bearer /i.exec(header);
    // Compared as digests (equal length, constant time) whatever the header holds.
    const got = digest(scheme ? header.slice(scheme[0].length) : `\u0000${header}`);
    if (!timingSafeEqual(got, want)) {
      return c.json(errorBody("unauthorized", "missing or wrong bearer token"), 401, { "www-authenticate": "Bearer" });
    }
    return next();
  };
}

const KEY = /^[\x21-\x7e]{1,200}$/;

/**
 * Idempotency-Key: the first response (status < 500) to a key is stored with a hash of method,
 * path and query, body as sent and whether it asks for a stream. A retry with the same request gets the stored response back and runs nothing (so
 * no hook fires twice); the same key with a different request is refused with 422. A stored answer
 * expires after idempotency_ttl_seconds: then the key is free again (expired rows are purged).
 *
 * The key is claimed in the database before the request runs (a row with status 0), so two
 * processes on one database never both run it: the second waits for the first one's answer and
 * replays it. A claim whose process died is taken over after CLAIM_STALE_MS; a request that ends
 * in a 5xx or session_busy (streamed or not: asksForRetry) gives its key back.
 */
/** `work`: where the answer of a streamed request, stored once its stream ends, is counted (a shutdown waits for it). */
export function idempotency(core: Core, work: InFlight): MiddlewareHandler {
  const locks = new KeyedMutex();
  const ttlMs = core.config.idempotency_ttl_seconds * 1000;
  let lastPurge = 0;
  return async (c, next) => {
    const key = c.req.header("idempotency-key");
    if (key === undefined || c.req.method === "GET" || c.req.method === "HEAD") return next();
    if (!KEY.test(key)) return c.json(errorBody("invalid_idempotency_key", "Idempotency-Key must be 1-200 visible ASCII characters"), 400);
    const url = new URL(c.req.url);
    // The representation asked for is part of the request: a streamed turn and a plain one differ.
    const hash = digest(`${c.req.method} ${url.pathname}${url.search}${wantsEventStream(c) ? " sse" : ""}\n${await c.req.text()}`).toString("hex");
    return locks.run(key, async () => {
      const waitUntil = Date.now() + CLAIM_WAIT_MS;
      // This request's claim, told from another's (a stale claim taken over, a lost answer).
      const owner = randomUUID();
      for (;;) {
        const now = core.now();
        let claimed: boolean;
        try {
          claimed = await claim(core, key, hash, owner, now, ttlMs);
        } catch (err) {
          // The claim may have committed with its answer lost on the way back (the database or the
          // network failed): left, it held the key 10 minutes while the request never ran.
          await release(core, key, owner);
          throw err;
        }
        if (claimed) break;
        const seen = await core.storage.db.selectFrom("idempotency").selectAll().where("key", "=", key).executeTakeFirst();
        if (!seen) continue; // given back (a 5xx) or expired meanwhile: claim again
        if (seen.request_hash !== hash) {
          return c.json(errorBody("idempotency_key_reused", "this Idempotency-Key was used for a different request"), 422);
        }
        if (seen.status !== 0) return c.body(seen.response, seen.status as 200, { "content-type": seen.content_type, "idempotent-replay": "true" });
        // Another process runs this request right now: wait for its answer.
        if (Date.now() > waitUntil) {
          return c.json(errorBody("idempotency_key_in_progress", "a request with this Idempotency-Key is still running; retry later"), 409);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
      const now = core.now();
      try {
        await next();
      } catch (err) {
        await release(core, key, owner);
        throw err;
      }
      const status = c.res.status;
      // An answer that asks for the request again gives the key back (a retry with it runs it).
      const code = status === 409 ? await c.res.clone().json().then((b: { error?: { code?: string } }) => b.error?.code, () => undefined) : undefined;
      if (asksForRetry(status, code)) {
        await release(core, key, owner);
        return;
      }
      const contentType = c.res.headers.get("content-type") ?? "application/json";
      const purge = now - lastPurge > 60_000;
      if (purge) lastPurge = now;
      const storeAnswer = async (response: string): Promise<void> => {
        const store = () =>
          core.storage.write(async (trx) => {
            if (purge) await trx.deleteFrom("idempotency").where("created_at", "<=", now - ttlMs).where("status", "<>", 0).execute();
            // Only our own claim: a stale one another process took over meanwhile is not overwritten.
            await trx
              .updateTable("idempotency")
              .set({ status, response, content_type: contentType })
              .where("key", "=", key)
              .where("status", "=", 0)
              .where("response", "=", owner)
              .execute();
          });
        // The request is done and its answer in hand: a database that cannot take the answer right
        // now must not turn it into a 5xx (the client would take it for "nothing changed"). The
        // client gets it; the answer is stored as soon as the database takes it, and until then a
        // retry with this key waits for it (the claim holds) instead of running the request again.
        await store().catch((err: unknown) => writeLater(key, "answer stored", store, err));
      };
      const body = c.res.clone().text();
      // A stream (a streamed turn) reaches the client as it comes; its answer is stored once it has
      // ended (until then a retry with this key waits for it).
      if (contentType.startsWith("text/event-stream")) {
        void work.track(body.then(
          (text) => {
            // A stream that ended with a failure a plain turn would have answered 5xx or session_busy: as that one.
            const failed = streamFailure(c);
            return failed && asksForRetry(failed.status, failed.code) ? release(core, key, owner) : storeAnswer(text);
          },
          (err: unknown) => log("warn", "idempotency: the streamed answer could not be read; the claim expires", { key, error: (err as Error)?.message ?? String(err) }),
        ));
        return;
      }
      await storeAnswer(await body);
    });
  };
}

/**
 * Writes what the database did not take at first (a key's answer, or its release): tried again every
 * STORE_RETRY_MS while a claim lasts, so a retry with the key is not held up by a claim whose
 * request is long over.
 */
function writeLater(key: string, what: "answer stored" | "key given back", write: () => Promise<unknown>, first: unknown): void {
  log("warn", `idempotency: ${what} not yet, trying again`, { key, error: (first as Error)?.message ?? String(first) });
  const until = Date.now() + CLAIM_STALE_MS;
  const again = () => {
    write().then(
      () => log("info", `idempotency: ${what}`, { key }),
      (err: unknown) => {
        if (Date.now() + STORE_RETRY_MS < until) setTimeout(again, STORE_RETRY_MS).unref?.();
        else log("error", `idempotency: ${what} never; the claim expires on its own`, { key, error: (err as Error)?.message ?? String(err) });
      },
    );
  };
  setTimeout(again, STORE_RETRY_MS).unref?.();
}

const STORE_RETRY_MS = 1_000;

/** Waits this long for another process's answer to the same key before answering 409. */
const CLAIM_WAIT_MS = 60_000;
/** A claim (status 0) older than this belongs to a process that died: it may be taken over. */
const CLAIM_STALE_MS = 10 * 60_000;

/**
 * Takes `key` for this request in one statement: free, expired, or a dead process's claim. True when
 * taken. A claim is status 0; its `response` names its owner until the answer replaces it.
 */
async function claim(core: Core, key: string, hash: string, owner: string, now: number, ttlMs: number): Promise<boolean> {
  const row = { key, request_hash: hash, status: 0, response: owner, created_at: now };
  const res = await core.storage.write((trx) =>
    trx
      .insertInto("idempotency")
      .values(row)
      .onConflict((oc) =>
        oc
          .column("key")
          .doUpdateSet(row)
          .where((eb) =>
            eb.or([
              eb.and([eb("idempotency.status", "<>", 0), eb("idempotency.created_at", "<=", now - ttlMs)]),
              eb.and([eb("idempotency.status", "=", 0), eb("idempotency.created_at", "<=", now - CLAIM_STALE_MS)]),
            ]),
          ),
      )
      .returning("key")
      .execute(),
  );
  return res.length > 0;
}

/**
 * Gives a key back (its request failed): the next try runs it again. A request that failed because
 * the database went away cannot give it back now either: it does as soon as the database is back
 * (otherwise every retry waited a minute and was refused, until the claim went stale).
 */
async function release(core: Core, key: string, owner: string): Promise<void> {
  // Only this request's claim: another's (it took a stale one over) is not given away.
  const give = () => core.storage.write((trx) => trx.deleteFrom("idempotency").where("key", "=", key).where("status", "=", 0).where("response", "=", owner).execute());
  await give().catch((err: unknown) => writeLater(key, "key given back", give, err));
}
