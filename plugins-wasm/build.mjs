// Builds plugins from source to plugin.wasm beside their manifest, all in this one process:
//   plugin.ts  AssemblyScript, with the compiler from node_modules (no downloads);
//   plugin.rs  Rust `#![no_std]` cdylib, with /usr/bin/rustc (apt: rustc libstd-rust-dev-wasm32);
//   plugin.c   C with wasi-libc, with clang (apt: clang lld wasi-libc libclang-rt-14-dev-wasm32).
// A plugin whose toolchain is missing is skipped with a message saying what to install. A failed
// build deletes the old plugin.wasm and leaves plugin.build-error (the loader shows it as the
// reason), so a stale module never looks current. Run by `npm run build:plugins` and `npm ci`.
//   node plugins-wasm/build.mjs [name ...]           plugins of this folder (and hostile/) by name
//   node plugins-wasm/build.mjs PATH [PATH ...]      plugin folders anywhere, or folders of plugins
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import asc from "assemblyscript/asc";

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);
const LIB_PACKAGE = "@hookbox/plugin-lib";

// --runtime stub: no GC; lib/index.ts beginCall() resets the heap at every call (see there).
// Extism provides no env.abort, so every plugin links lib/abort.ts's handler instead: by its path
// in this repo, or by its package path for a plugin that imports the library as a package.
const AS_FLAGS = ["-O3", "--noAssert", "--runtime", "stub"];
const RUSTC = process.env.HOOKBOX_RUSTC ?? "/usr/bin/rustc";
const CLANG = process.env.HOOKBOX_CLANG ?? "clang";
const WASI_SYSROOT = process.env.HOOKBOX_WASI_SYSROOT ?? "/usr";

function collect() {
  let text = "";
  return { write: (chunk) => void (text += String(chunk)), toString: () => text };
}

// A plugin's folder is not trusted, its source no more than its module: the compilers run with no
// secret of the caller's environment (Rust's env! reads it at compile time), and each language
// refuses what would read the host's files into the module (findings of an outside probe: a Rust
// plugin with include_bytes!("/etc/passwd") printed the builder's file from an ungranted command).
const COMPILER_ENV = Object.fromEntries(["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "SYSTEMROOT"].filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]]));

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: "utf8", env: COMPILER_ENV });
  if (r.error) return `${cmd}: ${r.error.message}`;
  return r.status === 0 ? null : `${r.stderr}${r.stdout}`.trim() || `${cmd} exited with ${r.status}`;
}

let rustMissing;
let clangMissing;
const LANGUAGES = {
  "plugin.ts": {
    missing: () => null,
    async build(dir, source, out) {
      const external = readFileSync(source, "utf8").includes(`"${LIB_PACKAGE}"`);
      const abort = external ? `~lib/${LIB_PACKAGE}/abort/hookboxAbort` : `${relative(root, join(here, "lib")).split("\\").join("/")}/abort/hookboxAbort`;
      const stderr = collect();
      const base = external ? dir : root;
      const { error } = await asc.main(
        [relative(base, source), "--outFile", relative(base, out), "--baseDir", base, ...AS_FLAGS, "--use", `abort=${abort}`,
          // The plugin's own node_modules first, then this repo's (where the library is linked).
          ...(external ? ["--path", join(root, "node_modules")] : [])],
        { stdout: collect(), stderr, readFile: readSource },
      );
      return error ? `${error.message}\n${stderr}` : null;
    },
  },
  "plugin.rs": {
    missing() {
      rustMissing ??= toolMissing(RUSTC, ["--print", "target-libdir", "--target", "wasm32-unknown-unknown"], (libdir) => existsSync(libdir.trim()))
        ? `Rust toolchain with the wasm32 target not found at ${RUSTC} (apt-get install rustc libstd-rust-dev-wasm32; or set HOOKBOX_RUSTC)`
        : "";
      return rustMissing || null;
    },
    refused: (dir) => refusedIn(dir, [".rs"], RUST_REFUSED),
    build: (_dir, source, out) =>
      run(RUSTC, ["--edition", "2021", "--target", "wasm32-unknown-unknown", "--crate-type", "cdylib", "-O", "-C", "panic=abort", "-C", "strip=symbols", source, "-o", out]),
  },
  "plugin.c": {
    missing() {
      clangMissing ??=
        toolMissing(CLANG, ["--version"], () => true) || !existsSync(join(WASI_SYSROOT, "include", "wasm32-wasi", "stdio.h"))
          ? `clang with wasi-libc not found (${CLANG}, sysroot ${WASI_SYSROOT}; apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32)`
          : "";
      return clangMissing || null;
    },
    refused: (dir) => refusedIn(dir, [".c", ".h"], C_REFUSED, cAsPreprocessed),
    build: (_dir, source, out) =>
      run(CLANG, ["--target=wasm32-wasi", `--sysroot=${WASI_SYSROOT}`, "-mexec-model=reactor", "-O2", "-Wl,--strip-all", "-o", out, source]),
  },
};

/**
 * asc's file reader, but for the plugin folder's asconfig.json, which is never read: it would give
 * the compiler its options, a "transform" among them (JavaScript asc runs in this process).
 */
const readSource = (file, dir) => (file === "asconfig.json" ? Promise.resolve(null) : readFile(join(dir, file), "utf8").catch(() => null));

// What reads the builder's files or environment into a module at compile time, found by a plain
// scan of the folder's sources (comments and strings included: the message names the line, which
// an author can reword). C is scanned as its preprocessor reads it: lines joined at a backslash,
// the digraphs %: and %:%: as # and ##.
const RUST_REFUSED = [
  [
    /\b(include_bytes|include_str|option_env|cfg_attr)\b|\b(include|env)\s*!(?!=)|(::|\{|,)\s*(include|env)\b/,
    "include!, include_bytes!, include_str!, env!, option_env! (under any name) and cfg_attr read or can read the builder's files or environment",
  ],
  [/\$\s*[A-Za-z_]\w*\s*!(?!=)/, "a macro invoked through a macro variable ($name!) can be include! or env!"],
  [/#\s*!?\s*\[\s*path\b/, "#[path] makes a module of any file of the builder's"],
];
const C_REFUSED = [
  [/\b(asm|__asm|__asm__|incbin)\b/, "inline assembly (.incbin) reads the builder's files"],
  [/#\s*embed\b|\b__has_embed\b/, "#embed reads the builder's files"],
  [/##/, "token pasting can spell asm"],
  [/#\s*(include|include_next|import)\b\s*([^\s<"]|[<"](\/|[^>"\n]*\.\.))/, "an #include names a header of the folder or the system's: no absolute path, no .., no computed name"],
];
const cAsPreprocessed = (text) => text.replace(/\\\r?\n/g, "").replaceAll("%:", "#");

/**
 * The first construct of `rules` in the folder's `exts` files, as "file:line: refused: why", or
 * null; a symbolic link in the folder is refused too (a header or module that is a host file).
 */
function refusedIn(dir, exts, rules, prepare = (text) => text) {
  const entries = readdirSync(dir, { recursive: true, withFileTypes: true });
  for (const e of entries) {
    const file = join(e.parentPath ?? e.path, e.name);
    if (e.isSymbolicLink()) return `${relative(dir, file)}: refused: a symbolic link (it can name any file of the builder's; the build compiles source it does not trust)`;
    if (!e.isFile() || !exts.some((x) => e.name.endsWith(x))) continue;
    const lines = prepare(readFileSync(file, "utf8")).split("\n");
    for (let i = 0; i < lines.length; i++) {
      const hit = rules.find(([re]) => re.test(lines[i]));
      if (hit) return `${relative(dir, file)}:${i + 1}: refused: ${hit[1]} (the build compiles source it does not trust)\n  ${lines[i].trim().slice(0, 200)}`;
    }
  }
  return null;
}

/** True when `cmd args` cannot run or its output fails `ok`. */
function toolMissing(cmd, args, ok) {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  return r.error !== undefined || r.status !== 0 || !ok(r.stdout);
}

function sourceOf(dir) {
  return Object.keys(LANGUAGES).find((f) => existsSync(join(dir, f)));
}

/** Plugin folders directly inside `base` (one level, like the loader's scan). */
function pluginDirsIn(base) {
  if (!existsSync(base)) return [];
  return readdirSync(base, { withFileTypes: true })
    .filter((e) => e.isDirectory() && sourceOf(join(base, e.name)))
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((e) => join(base, e.name));
}

function selected(args) {
  // An argument is a plugin of this folder (name or hostile/name) when one exists, else a path.
  const own = [...pluginDirsIn(here), ...pluginDirsIn(join(here, "hostile"))];
  const ownByName = (a) => own.find((d) => relative(here, d) === a || d.split(/[\\/]/).pop() === a);
  const dirs = args.length === 0 ? own : [];
  for (const a of args) {
    const mine = ownByName(a);
    const p = resolve(a);
    if (mine) dirs.push(mine);
    else if (existsSync(p) && sourceOf(p)) dirs.push(p);
    else if (existsSync(p) && pluginDirsIn(p).length > 0) dirs.push(...pluginDirsIn(p));
    else throw new Error(`${a}: not a plugin of plugins-wasm/, nor a folder with plugin.ts, plugin.rs or plugin.c (or folders of them)`);
  }
  return dirs;
}

/** Builds one plugin; returns "skipped: why", an error text, or null on success. */
async function build(dir) {
  const file = sourceOf(dir);
  const lang = LANGUAGES[file];
  const missing = lang.missing();
  if (missing) return { skipped: missing };
  const out = join(dir, "plugin.wasm");
  const tmp = join(dir, ".plugin.wasm.tmp");
  const marker = join(dir, "plugin.build-error");
  rmSync(tmp, { force: true });
  const error = lang.refused?.(dir) ?? (await lang.build(dir, join(dir, file), tmp));
  if (error || !existsSync(tmp)) {
    // Never leave the previous build looking current.
    rmSync(out, { force: true });
    rmSync(tmp, { force: true });
    writeFileSync(marker, `${error ?? "no output"}\n`);
    return { error: error ?? "the compiler wrote no plugin.wasm" };
  }
  renameSync(tmp, out);
  rmSync(marker, { force: true });
  return {};
}

let dirs;
try {
  dirs = selected(process.argv.slice(2));
} catch (err) {
  console.error(`build-plugins: ${err.message}`);
  process.exit(2);
}
const started = Date.now();
let failed = 0;
let skipped = 0;
let lastErr = "";
for (const dir of dirs) {
  const t0 = Date.now();
  const r = await build(dir);
  const name = dir.startsWith(here) ? relative(here, dir) : dir;
  if (r.skipped) {
    skipped++;
    console.log(`build-plugins: SKIPPED ${name}: ${r.skipped}`);
  } else if (r.error) {
    failed++;
    // A broken lib/ file fails every plugin the same way: print its errors once.
    console.error(`build-plugins: FAILED ${name}\n${r.error === lastErr ? "(same errors as above)" : r.error}`);
    lastErr = r.error;
  } else {
    console.log(`build-plugins: ${name} -> ${relative(process.cwd(), join(dir, "plugin.wasm"))} (${Date.now() - t0} ms)`);
  }
}
const secs = ((Date.now() - started) / 1000).toFixed(1);
console.log(`build-plugins: ${dirs.length - failed - skipped}/${dirs.length} built in ${secs} s${skipped ? `, ${skipped} skipped (toolchain missing)` : ""}`);
if (failed > 0 || dirs.length === 0) process.exit(1);
