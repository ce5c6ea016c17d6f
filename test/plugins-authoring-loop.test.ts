// The plugin author's loop, end to end: `hookbox plugins new` scaffolds a plugin in a folder outside
// this repo (AssemblyScript with the library as a package, Rust, C), builds it, and a server whose
// plugins.dir is that folder loads it and answers its command over real HTTP.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../runtime/cli.ts";
import { command, startPluginServer, type PluginServer } from "./helpers/plugins.ts";
import { skipUnlessBuilt } from "./helpers/toolchains.ts";

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

describe("hookbox plugins new -> build -> load -> call", () => {
  let dir: string;
  let s: PluginServer | undefined;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "hookbox-loop-"));
  });
  after(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("scaffolds and builds one plugin per language; refuses a taken name and an unknown language", async () => {
    for (const [name, lang] of [["my-as", "as"], ["my-rust", "rust"], ["my-c", "c"]]) {
      const r = await cli("plugins", "new", name!, "--lang", lang!, "--dir", dir);
      assert.equal(r.code, 0, r.err);
      assert.match(r.out, new RegExp(`created .*${name}.*command /${name!.replace("-", "_")}`));
      assert.equal(JSON.parse(readFileSync(join(dir, name!, "manifest.json"), "utf8")).name, name);
    }
    assert.ok(existsSync(join(dir, "my-as", "plugin.wasm")));
    const again = await cli("plugins", "new", "my-as", "--dir", dir);
    assert.equal(again.code, 1);
    assert.match(again.err, /already exists/);
    const cobol = await cli("plugins", "new", "x", "--lang", "cobol", "--dir", dir);
    assert.equal(cobol.code, 2);
    assert.match(cobol.err, /--lang must be one of as, rust, c/);
  });

  it("a server on that folder loads them and runs their commands (KV included)", async (t) => {
    const built = ["my-as", "my-rust"].filter((n) => !skipUnlessBuilt(join(dir, n, "plugin.wasm")));
    if (built.length < 2) t.diagnostic(`not built here: ${["my-as", "my-rust"].filter((n) => !built.includes(n)).join(", ")}`);
    s = await startPluginServer({ dir, enabled: built, grants: Object.fromEntries(built.map((n) => [n, ["kv"]])) });
    const greeting: Record<string, string> = { "my-as": "AssemblyScript", "my-rust": "Rust" };
    for (const name of built) {
      const cmd = name.replace("-", "_");
      const first = await command(s, cmd, { raw_args: "Ada" });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.output, `hello from ${greeting[name]}, Ada (greeting #1)`);
      assert.equal((await command(s, cmd, {})).body.output, `hello from ${greeting[name]} (greeting #2)`);
      const failed = await command(s, cmd, { raw_args: "fail" });
      assert.ok(failed.status >= 400, `${name}: a non-zero return is a failure`);
    }
  });
});
