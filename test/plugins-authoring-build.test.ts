// The plugin author's build: plugins-wasm/build.mjs builds AssemblyScript (the library used as a
// package from outside this repo), Rust and C plugins in any folder; a failed build leaves no
// plugin.wasm (only plugin.build-error); and lib/payloads.ts is what the generator makes from the
// hook catalogue today.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
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

  // Outside probes' plugin folders: an asconfig.json "transform" ran its JavaScript in the build (as
  // the operator, environment included); Rust's include_bytes! and C's .incbin baked the builder's
  // files into modules that printed them from commands with no grant, past line-by-line checks
  // (a comment inside a directive, a file not named .c/.h/.rs, a line splice); a failed build wrote
  // its error through a plugin.build-error link (a shell start-up file: code run on the host).
  it("takes nothing from a plugin's folder but its source: no transform, no host file read in, nothing written outside", () => {
    const ran = join(dir, "transform-ran");
    const secret = join(dir, "secret.txt");
    writeFileSync(secret, "s3cret\n");
    writeFileSync(join(dir, "secret.h"), 'const char *S = "s3cret";\n');
    writeFileSync(join(dir, "secret-config.ts"), 'export const KEY: string = "s3cret";\n');
    cpSync(join(SEED_DIR, "hello-as"), join(dir, "evil-as"), { recursive: true, filter: (src) => !src.endsWith(".wasm") });
    writeFileSync(join(dir, "evil-as", "asconfig.json"), JSON.stringify({ options: { transform: ["./hook.mjs"] } }));
    writeFileSync(join(dir, "evil-as", "hook.mjs"), `import { writeFileSync } from "node:fs"; writeFileSync(${JSON.stringify(ran)}, "ran"); export default class {}\n`);
    const as = build(join(dir, "evil-as"));
    assert.equal(as.status, 0, as.stderr + as.stdout);
    assert.equal(existsSync(ran), false, "the folder's transform did not run");
    const cases: Array<[string, Record<string, string>, RegExp]> = [
      ["evil-as-import", { "plugin.ts": 'import { KEY } from "../secret-config";\nexport function f(): i32 { return KEY.length; }\n' }, /parse error|not found/i],
      ["evil-rust", { "plugin.rs": `#![no_std]\npub static X: &[u8] = include_bytes!(${JSON.stringify(secret)});\n#[panic_handler] fn p(_: &core::panic::PanicInfo) -> ! { loop {} }\n` }, /refused: the source reads .*secret\.txt/],
      ["evil-rust-split", { "plugin.rs": `#![no_std]\npub static X: &str = include/**/\n!("payload.txt");\n#[panic_handler] fn p(_: &core::panic::PanicInfo) -> ! { loop {} }\n`, "payload.txt": `include_str!(${JSON.stringify(secret)})` }, /refused: the source reads .*secret\.txt/],
      ["evil-c-inc", { "plugin.c": '#include "payload.inc"\n', "payload.inc": `__asm__(".incbin \\"${secret}\\"");\n` }, /refused: inline assembly/],
      ["evil-c-comment", { "plugin.c": `#/**/include ${JSON.stringify(join(dir, "secret.h"))}\n` }, /refused: the source includes .*secret\.h/],
    ];
    for (const [name, files, why] of cases) {
      mkdirSync(join(dir, name));
      for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, name, file), text);
      const r = build(join(dir, name));
      if (/SKIPPED/.test(r.stdout) && !toolchainsRequired()) continue;
      assert.equal(r.status, 1, `${name}: ${r.stdout}`);
      assert.match(r.stderr, why, name);
      assert.equal(existsSync(join(dir, name, "plugin.wasm")), false, name);
    }
    // The error marker is a new file: a link there is replaced, its target left as it was.
    const victim = join(dir, "victim.txt");
    writeFileSync(victim, "untouched");
    mkdirSync(join(dir, "evil-link"));
    writeFileSync(join(dir, "evil-link", "plugin.ts"), "export function f(): i32 { return nope; }\n");
    symlinkSync(victim, join(dir, "evil-link", "plugin.build-error"));
    assert.equal(build(join(dir, "evil-link")).status, 1);
    assert.equal(readFileSync(victim, "utf8"), "untouched");
    assert.equal(lstatSync(join(dir, "evil-link", "plugin.build-error")).isFile(), true);
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
