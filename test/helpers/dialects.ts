// The databases the storage- and plugin-facing suites run against, like Kysely's own tests loop
// over dialects: the embedded libSQL file and a real libSQL server (sqld, see sqld.ts).
// HOOKBOX_TEST_DB=file|sqld narrows the loop (e.g. while developing).
export type TestDb = "file" | "sqld";

export const TEST_DBS: readonly TestDb[] = (() => {
  const only = process.env.HOOKBOX_TEST_DB;
  return only === "file" || only === "sqld" ? [only] : ["file", "sqld"];
})();
