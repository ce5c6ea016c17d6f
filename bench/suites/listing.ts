// Listing and paging sessions as a client does (GET /v1/sessions through the Hono app, in-process):
// first page, a page in the middle (keyset cursor), and the profile / archived filters, at 100,000
// sessions vs a near-empty database (100 sessions, so both sides return full pages of 50: the ratio
// is what the table's size costs, not the size of the answer). Both databases are open at once and
// measured in alternating rounds; the ratio is the median of each round's paired ratio (a pair runs
// back to back, so slow phases of the shared machine hit both sides of it alike).
import { sql } from "kysely";
import { createApp } from "../../runtime/http/app.ts";
import { openBenchCore, type BenchCore } from "../lib/core.ts";
import { measure, median, medianRound, type Timing } from "../lib/measure.ts";
import { progress, type BenchOptions } from "../lib/options.ts";
import type { Row } from "../lib/report.ts";
import { seedTrees } from "../lib/seed.ts";

const SMALL = 100;
const LARGE = 100_000;
const ROUNDS = 5;
const QUERIES = ["first page", "page in the middle", "profile filter", "archived filter"] as const;
type Query = (typeof QUERIES)[number];

async function seeded(total: number): Promise<{ bc: BenchCore; get: Record<Query, () => Promise<void>> }> {
  const bc = await openBenchCore();
  for (let done = 0; done < total; done += 10_000) await seedTrees(bc.core, Math.min(10_000, total - done), done % 20_000 === 0 ? "bench" : "other");
  // A server's WAL is checkpointed as it goes; a freshly seeded one holds every page in the WAL.
  await sql`PRAGMA wal_checkpoint(TRUNCATE)`.execute(bc.core.storage.db);
  const app = createApp(bc.core);
  const all = await bc.core.storage.db.selectFrom("sessions").select("id").orderBy("created_at").orderBy("id").execute();
  const middle = all[Math.min(Math.floor(all.length / 2), all.length - 51)]!.id;
  const paths: Record<Query, string> = {
    "first page": "/v1/sessions?limit=50",
    "page in the middle": `/v1/sessions?limit=50&after=${middle}`,
    "profile filter": "/v1/sessions?limit=50&profile=bench",
    "archived filter": "/v1/sessions?limit=50&archived=false",
  };
  const get = {} as Record<Query, () => Promise<void>>;
  for (const q of QUERIES) {
    get[q] = async () => {
      const res = await app.request(paths[q]);
      const body = (await res.json()) as { sessions: unknown[] };
      if (res.status !== 200 || body.sessions.length !== 50) throw new Error(`${paths[q]}: ${res.status}, ${body.sessions?.length} sessions`);
    };
  }
  return { bc, get };
}

export async function runListing(opts: BenchOptions): Promise<Row[]> {
  progress(`listing: seeding ${SMALL} and ${LARGE.toLocaleString("en")} sessions`);
  const small = await seeded(SMALL);
  const large = await seeded(LARGE);
  try {
    const rows: Row[] = [];
    for (const q of QUERIES) {
      progress(`listing: ${q}, ${ROUNDS} alternating rounds`);
      const ts: Timing[] = [];
      const tl: Timing[] = [];
      const m = { time: opts.taskMs / ROUNDS, iterations: opts.minIterations };
      for (let r = 0; r < ROUNDS; r++) {
        ts.push(await measure(`list ${q} small`, small.get[q], m));
        tl.push(await measure(`list ${q} large`, large.get[q], m));
      }
      const s = medianRound(ts);
      const l = medianRound(tl);
      const ratio = median(tl.map((t, r) => t.mean / ts[r]!.mean));
      const ratioP99 = median(tl.map((t, r) => t.p99 / ts[r]!.p99));
      const group = `GET /v1/sessions?limit=50, ${q}`;
      rows.push({ group, case: `${SMALL} sessions (near-empty floor)`, sessions: SMALL, mean_ms: s.mean, p99_ms: s.p99, samples: s.samples });
      rows.push({ group, case: `${LARGE.toLocaleString("en")} sessions`, sessions: LARGE, mean_ms: l.mean, p99_ms: l.p99, samples: l.samples, ratio, ratio_p99: ratioP99, note: "ratios: median of paired rounds" });
    }
    return rows;
  } finally {
    await small.bc.close();
    await large.bc.close();
  }
}
