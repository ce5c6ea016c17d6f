// Cross-cutting HTTP guards: bearer token, and Idempotency-Key replay for mutating requests.
import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { Core } from "../core.ts";
import { KeyedMutex } from "../util/mutex.ts";
import { errorBody } from "./errors.ts";

const digest = (s: string) => createHash("sha256").update(s).digest();

/** With a configured token every endpoint wants `Authorization: Bearer <token>`. */
export function bearerAuth(token: string | undefined): MiddlewareHandler {
  const want = token ? digest(`Bearer ${token}`) : undefined;
  return async (c, next) => {
    if (!want) return next();
    const got = digest(c.req.header("authorization") ?? "");
    if (!timingSafeEqual(got, want)) {
      return c.json(errorBody("unauthorized", "missing or wrong bearer token"), 401, { "www-authenticate": "Bearer" });
    }
    return next();
  };
}

const KEY = /^[\x21-\x7e]{1,200}$/;

/**
 * Idempotency-Key: the first response (status < 500) to a key is stored with a hash of method,
 * path and body. A retry with the same request gets the stored response back and runs nothing (so
 * no hook fires twice); the same key with a different request is refused with 422. A stored answer
 * expires after idempotency_ttl_seconds: then the key is free again (expired rows are purged).
 */
export function idempotency(core: Core): MiddlewareHandler {
  const locks = new KeyedMutex();
  const ttlMs = core.config.idempotency_ttl_seconds * 1000;
  let lastPurge = 0;
  return async (c, next) => {
    const key = c.req.header("idempotency-key");
    if (key === undefined || c.req.method === "GET" || c.req.method === "HEAD") return next();
    if (!KEY.test(key)) return c.json(errorBody("invalid_idempotency_key", "Idempotency-Key must be 1-200 visible ASCII characters"), 400);
    const url = new URL(c.req.url);
    const hash = digest(`${c.req.method} ${url.pathname}${url.search}\n${await c.req.text()}`).toString("hex");
    return locks.run(key, async () => {
      const db = core.storage.db;
      const now = core.now();
      const seen = await db.selectFrom("idempotency").selectAll().where("key", "=", key).where("created_at", ">", now - ttlMs).executeTakeFirst();
      if (seen) {
        if (seen.request_hash !== hash) {
          return c.json(errorBody("idempotency_key_reused", "this Idempotency-Key was used for a different request"), 422);
        }
        return c.body(seen.response, seen.status as 200, { "content-type": "application/json", "idempotent-replay": "true" });
      }
      await next();
      if (c.res.status < 500) {
        const response = await c.res.clone().text();
        const row = { key, request_hash: hash, status: c.res.status, response, created_at: now };
        const purge = now - lastPurge > 60_000;
        if (purge) lastPurge = now;
        await core.storage.write(async (trx) => {
          if (purge) await trx.deleteFrom("idempotency").where("created_at", "<=", now - ttlMs).execute();
          // An expired row for this key (not purged yet) is replaced.
          await trx
            .insertInto("idempotency")
            .values(row)
            .onConflict((oc) => oc.column("key").doUpdateSet(row).where("idempotency.created_at", "<=", now - ttlMs))
            .execute();
        });
      }
      return;
    });
  };
}
