// The thread that checks plugin tools' arguments against their schemas (check-client.ts): what a
// check costs depends on the schema and the arguments, both of which a hostile plugin writes, so
// it runs here, where the server's thread does not wait for it and a check past its time is ended
// with the thread.
import { Validator, type Schema } from "@cfworker/json-schema";
import { workerData, type MessagePort } from "node:worker_threads";
import { describeIssues } from "./issues.ts";
import type { CheckAnswer, CheckRequest } from "./check-client.ts";

const port = (workerData as { port: MessagePort }).port;
const validators = new Map<number, Validator>();

port.on("message", (m: CheckRequest) => {
  let answer: CheckAnswer;
  try {
    let validator = validators.get(m.schemaId);
    if (!validator) {
      // draft 2020-12, short-circuit off: every issue is reported back to the model at once.
      validator = new Validator(m.schema as Schema, "2020-12", false);
      validators.set(m.schemaId, validator);
    }
    const res = validator.validate(m.args);
    answer = { id: m.id, problem: res.valid ? null : describeIssues(res.errors) };
  } catch (err) {
    answer = { id: m.id, problem: `the check failed: ${(err as Error).message}`.slice(0, 500) };
  }
  port.postMessage(answer);
});
port.postMessage({ ready: true } satisfies CheckAnswer);
