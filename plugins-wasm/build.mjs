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
import { existsSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
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
  // A bound on the compiler's time: a source that is a FIFO (or any read that never ends) would hold the build.
  const r = spawnSync(cmd, args, { encoding: "utf8", env: COMPILER_ENV, timeout: 300_000 });
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
        { stdout: collect(), stderr, readFile: sourceReader(dir) },
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
    build(dir, source, out) {
      // rustc says what the build read: every source file (include!, include_str!, include_bytes!,
      // #[path] modules among them) and every variable env! or option_env! asked for.
      const deps = `${out}.d`;
      const failed = run(RUSTC, ["--edition", "2021", "--target", "wasm32-unknown-unknown", "--crate-type", "cdylib", "-O", "-C", "panic=abort", "-C", "strip=symbols", "--emit", `dep-info=${deps},link=${out}`, source]);
      const outside = failed ?? rustReadOutside(dir, existsSync(deps) ? readFileSync(deps, "utf8") : "");
      rmSync(deps, { force: true });
      return outside;
    },
  },
  "plugin.c": {
    missing() {
      clangMissing ??=
        toolMissing(CLANG, ["--version"], () => true) || !existsSync(join(WASI_SYSROOT, "include", "wasm32-wasi", "stdio.h"))
          ? `clang with wasi-libc not found (${CLANG}, sysroot ${WASI_SYSROOT}; apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32)`
          : "";
      return clangMissing || null;
    },
    build(dir, source, out) {
      // Preprocessed first: the text the compiler gets, every #include (and its file) named in its
      // line markers, every macro expanded; checked, then that very text is compiled.
      const target = ["--target=wasm32-wasi", `--sysroot=${WASI_SYSROOT}`];
      const pre = `${out}.i`;
      try {
        const failed = run(CLANG, [...target, "-E", "-o", pre, source]) ?? cReadOutside(dir, readFileSync(pre, "utf8"));
        return failed ?? run(CLANG, [...target, "-mexec-model=reactor", "-O2", "-Wl,--strip-all", "-x", "cpp-output", "-o", out, pre]);
      } finally {
        rmSync(pre, { force: true });
      }
    },
  },
};

// What a build may read besides the plugin's folder: this repo's plugin library, and for C the
// system's headers (the WASI sysroot's and clang's own).
const LIB_DIRS = [join(here, "lib"), join(root, "node_modules", LIB_PACKAGE)];
let clangHeaders;
const C_HEADER_DIRS = () =>
  (clangHeaders ??= [join(WASI_SYSROOT, "include"), join(spawnSync(CLANG, ["-print-resource-dir"], { encoding: "utf8", env: COMPILER_ENV }).stdout.trim(), "include")]);

const realOrSelf = (p) => {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
};
/** Whether `file` is (really: links resolved) inside one of `dirs`. */
const inside = (file, dirs) => dirs.some((d) => {
  const rel = relative(realOrSelf(d), realOrSelf(file));
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
});
const refusal = (what) => `refused: ${what} (the build compiles source it does not trust: it reads the plugin's folder and the toolchain's own files only)`;

/**
 * asc's file reader for a plugin in `dir`: the plugin's folder (its node_modules too) and the
 * plugin library only. Never the folder's asconfig.json: it would give the compiler its options, a
 * "transform" among them (JavaScript asc runs in this process). An import of any other file (a
 * secret in TypeScript syntax is AssemblyScript) fails as a file that is not there.
 */
const sourceReader = (dir) => (file, base) => {
  const path = resolve(base, file);
  if (file === "asconfig.json" || !inside(path, [dir, ...LIB_DIRS]) || !isFile(path)) return Promise.resolve(null);
  return readFile(path, "utf8").catch(() => null);
};
const isFile = (path) => {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
};

/** rustc's dep-info names a file outside `dir`, or an environment variable read: the refusal, else null. */
function rustReadOutside(dir, depInfo) {
  const env = /^# env-dep:([^=\s]+)/m.exec(depInfo);
  if (env) return refusal(`the source reads the environment variable ${env[1]} (env!, option_env!)`);
  for (const line of depInfo.split("\n")) {
    if (line.startsWith("#") || !line.includes(": ")) continue;
    // "target: deps", space-separated ("\ " is a space in a name), relative to rustc's directory (ours).
    const deps = line.slice(line.indexOf(": ") + 2).split(/(?<!\\) /).filter(Boolean).map((d) => d.replaceAll("\\ ", " "));
    const outside = deps.find((d) => !inside(resolve(d), [dir]));
    if (outside) return refusal(`the source reads ${outside} (include!, include_str!, include_bytes!, #[path])`);
  }
  return null;
}

/**
 * The preprocessed C names a file outside `dir` and the system's headers, or the plugin's own files
 * hold inline assembly (after macro expansion, with comments gone: a keyword cannot hide): the
 * refusal, else null. Strings are not told apart (a plain scan): "asm" in one is refused too.
 */
function cReadOutside(dir, text) {
  let own = true;
  for (const line of text.split("\n")) {
    const marker = /^# \d+ "((?:[^"\\]|\\.)*)"/.exec(line);
    if (marker) {
      const file = marker[1].replace(/\\(.)/g, "$1");
      if (file.startsWith("<")) continue; // <built-in>, <command line>
      own = inside(resolve(file), [dir]);
      if (!own && !inside(resolve(file), C_HEADER_DIRS())) return refusal(`the source includes ${file}`);
      continue;
    }
    const asm = own && /(?<![\w$])(asm|__asm|__asm__)(?![\w$])/.exec(line);
    if (asm) return refusal(`inline assembly (${asm[1]}) can read any file (.incbin)`);
  }
  return null;
}

/**
 * A symbolic link in the plugin's folder (a module or header that is a host file; an output file
 * the compiler or this build writes through), or anything but files and folders (a FIFO holds a
 * read forever): the refusal, else null. A plugin's own node_modules may link its packages; the
 * AssemblyScript reader takes nothing from outside the folder and the library anyway.
 */
function oddEntryIn(dir) {
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const path = join(e.parentPath ?? e.path, e.name);
    if (e.isFile() || e.isDirectory() || (e.isSymbolicLink() && relative(dir, path).split(/[\\/]/).includes("node_modules"))) continue;
    return `${relative(dir, path)}: ${refusal(e.isSymbolicLink() ? "a symbolic link can name any file of the builder's" : "only files and folders")}`;
  }
  return null;
}

// Compiler output quotes the plugin's source: its control characters (a terminal's escape
// sequences) are shown as \uXXXX; lines stay lines.
const printable = (text) => text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

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
    else if (!existsSync(p)) throw new Error(`${a}: no such file or folder (${p}), and no plugin of plugins-wasm/ has that name`);
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
  const found = oddEntryIn(dir) ?? (await lang.build(dir, join(dir, file), tmp));
  const error = found === null ? null : printable(found);
  if (error || !existsSync(tmp)) {
    // Never leave the previous build looking current.
    rmSync(out, { force: true });
    rmSync(tmp, { force: true });
    // A new file, never one the folder left there (a link would have it written elsewhere).
    rmSync(marker, { force: true });
    writeFileSync(marker, `${error ?? "no output"}\n`, { flag: "wx" });
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
