// Every JSON success body a test receives through the test server, checked against what
// /openapi.json says the route answers (runtime/http/responses.ts): the suites then hold the
// document to the code on every route they touch.
import { Validator } from "@cfworker/json-schema";
import { RESPONSE_COMPONENTS, RESPONSES } from "../../runtime/http/responses.ts";

// The document's references point into components.schemas; a standalone schema keeps them in $defs.
const local = (schema: unknown) => JSON.parse(JSON.stringify(schema).replaceAll("#/components/schemas/", "#/$defs/")) as Record<string, unknown>;
const defs = local(RESPONSE_COMPONENTS);

const routes = Object.entries(RESPONSES).map(([key, schema]) => {
  const [method, path] = key.split(" ") as [string, string];
  return {
    method,
    path: new RegExp(`^${path.replace(/:[A-Za-z_]+/g, "[^/]+")}$`),
    validator: new Validator({ ...local(schema), $defs: defs }, "2020-12", false),
  };
});

/** Throws when a 2xx JSON body does not match its route's documented schema. */
export function checkResponse(method: string, url: string, status: number, body: unknown): void {
  if (status < 200 || status >= 300 || typeof body !== "object" || body === null) return;
  const path = url.split("?")[0]!;
  const route = routes.find((r) => r.method === method && r.path.test(path));
  if (!route) return;
  const res = route.validator.validate(body);
  if (res.valid) return;
  const where = res.errors.slice(-5).map((e) => `${e.instanceLocation}: ${e.error}`);
  throw new Error(`${method} ${path} answered ${status} with a body /openapi.json does not describe: ${where.join("; ")}`);
}
