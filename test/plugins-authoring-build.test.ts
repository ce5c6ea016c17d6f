// The plugin author's build: plugins-wasm/build.mjs builds AssemblyScript (the library used as a
// package from outside this repo), Rust and C plugins in any folder; a failed build leaves no
// plugin.wasm (only plugin.build-error); and lib/payloads.ts is what the generator makes from the
// hook catalogue today.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generatePayloads, PAYLOADS_FILE } from "../plugins-wasm/tools/gen-payloads.ts";
import { BUILD_SCRIPT, toolchainsRequired } from "./helpers/toolchains.ts";
import { SEED_DIR } from "./helpers/plugins.ts";

describe("plugin build (build.mjs) and generated payloads", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "hookbox-authoring-"));
    for (const name of ["hello-as", "hello-rust", "hello-c"]) {
      cpSync(join(SEED_DIR, name), join(dir, name), { recursive: true, filter: (src) => !src.endsWith(".wasm") });
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const build = (...args: string[]) => spawnSync("node", [BUILD_SCRIPT, ...args], { encoding: "utf8" });

  it("lib/payloads.ts is current (npm run gen:payloads)", () => {
    assert.equal(readFileSync(PAYLOADS_FILE, "utf8"), generatePayloads());
  });

  it("builds AssemblyScript, Rust and C plugins outside the repo (or names the missing toolchain)", () => {
    const r = build(dir);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.ok(existsSync(join(dir, "hello-as", "plugin.wasm")), "the AS plugin imports @hookbox/plugin-lib from outside the repo");
    for (const name of ["hello-rust", "hello-c"]) {
      const built = existsSync(join(dir, name, "plugin.wasm"));
      if (!built) {
        assert.match(r.stdout, new RegExp(`SKIPPED ${dir}/${name}: .*apt-get install`), "a skip says what to install");
        assert.ok(!toolchainsRequired(), `${name} was skipped but HOOKBOX_REQUIRE_TOOLCHAINS is set:\n${r.stdout}`);
      }
    }
  });

  // An outside probe's plugin folders: an asconfig.json "transform" ran its JavaScript in the build
  // (as the operator, environment included); Rust's include_bytes! and C's .incbin baked the
  // builder's /etc/passwd into a module that printed it from a command with no grant.
  it("takes nothing from a plugin's folder but its source: no asconfig.json transform, no host file read in", () => {
    const ran = join(dir, "transform-ran");
    cpSync(join(SEED_DIR, "hello-as"), join(dir, "evil-as"), { recursive: true, filter: (src) => !src.endsWith(".wasm") });
    writeFileSync(join(dir, "evil-as", "asconfig.json"), JSON.stringify({ options: { transform: ["./hook.mjs"] } }));
    writeFileSync(join(dir, "evil-as", "hook.mjs"), `import { writeFileSync } from "node:fs"; writeFileSync(${JSON.stringify(ran)}, "ran"); export default class {}\n`);
    const as = build(join(dir, "evil-as"));
    assert.equal(as.status, 0, as.stderr + as.stdout);
    assert.equal(existsSync(ran), false, "the folder's transform did not run");
    for (const [name, file, source, why] of [
      ["evil-rust", "plugin.rs", '#![no_std]\nstatic X: &[u8] = include_bytes!("/etc/passwd");\n', /plugin\.rs:2: refused: include!/],
      ["evil-rust2", "plugin.rs", "#![no_std]\nmacro_rules! m { ($x:ident) => { $x!(\"/etc/passwd\") } }\n", /plugin\.rs:2: refused: a macro invoked through a macro variable/],
      ["evil-c", "plugin.c", '__asm__(".incbin \\"/etc/passwd\\"");\n', /plugin\.c:1: refused: inline assembly/],
      ["evil-c2", "plugin.c", '%:inc\\\nlude "/etc/passwd"\n', /plugin\.c:1: refused: an #include names a header of the folder/],
    ] as const) {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, file), source);
      const r = build(join(dir, name));
      if (/SKIPPED/.test(r.stdout) && !toolchainsRequired()) continue;
      assert.equal(r.status, 1, name);
      assert.match(r.stderr, why, name);
      assert.equal(existsSync(join(dir, name, "plugin.wasm")), false, name);
    }
  });

  it("a failed build removes the old plugin.wasm and leaves the compiler's error", () => {
    const src = join(dir, "hello-as", "plugin.ts");
    writeFileSync(src, readFileSync(src, "utf8") + "\nexport function broken(): i32 { return undefinedThing; }\n");
    const r = build(join(dir, "hello-as"));
    assert.equal(r.status, 1);
    assert.match(r.stderr, /FAILED .*hello-as/);
    assert.equal(existsSync(join(dir, "hello-as", "plugin.wasm")), false, "no stale module left behind");
    assert.match(readFileSync(join(dir, "hello-as", "plugin.build-error"), "utf8"), /undefinedThing/);
  });
});
