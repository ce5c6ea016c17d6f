// Compiles every plugins-wasm/<name>/plugin.ts and plugins-wasm/hostile/<name>/plugin.ts to
// plugin.wasm beside it with the AssemblyScript compiler from node_modules (no downloads), all in
// this one process. Run by `npm run build:plugins` and by `npm ci` ("prepare").
//   node plugins-wasm/build.mjs [name ...]   (names filter which plugins to build)
import { existsSync, readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import asc from "assemblyscript/asc";

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);

// --runtime stub: no GC; lib/index.ts beginCall() resets the heap at every call (see there).
// Extism provides no env.abort, so every plugin links lib/abort.ts's handler instead.
const FLAGS = ["-O3", "--noAssert", "--runtime", "stub", "--use", "abort=plugins-wasm/lib/abort/hookboxAbort"];

function pluginDirs() {
  const dirs = [];
  for (const base of [here, join(here, "hostile")]) {
    if (!existsSync(base)) continue;
    for (const e of readdirSync(base, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (e.isDirectory() && existsSync(join(base, e.name, "plugin.ts"))) dirs.push(join(base, e.name));
    }
  }
  return dirs;
}

function collect() {
  let text = "";
  return { write: (chunk) => void (text += String(chunk)), toString: () => text };
}

async function build(dir) {
  const entry = relative(root, join(dir, "plugin.ts"));
  const out = relative(root, join(dir, "plugin.wasm"));
  const stderr = collect();
  const { error } = await asc.main([entry, "--outFile", out, "--baseDir", root, ...FLAGS], {
    stdout: collect(),
    stderr,
  });
  return error ? `${error.message}\n${stderr}` : null;
}

const only = new Set(process.argv.slice(2));
const dirs = pluginDirs().filter((d) => only.size === 0 || only.has(relative(here, d)) || only.has(d.split(/[\\/]/).pop()));
const started = Date.now();
let failed = 0;
let lastErr = "";
for (const dir of dirs) {
  const t0 = Date.now();
  const err = await build(dir);
  const name = relative(here, dir);
  if (err) {
    failed++;
    // A broken lib/ file fails every plugin the same way: print its errors once.
    console.error(`build-plugins: FAILED ${name}\n${err === lastErr ? "(same errors as above)" : err}`);
    lastErr = err;
  } else {
    console.log(`build-plugins: ${name} -> ${relative(root, join(dir, "plugin.wasm"))} (${Date.now() - t0} ms)`);
  }
}
const secs = ((Date.now() - started) / 1000).toFixed(1);
console.log(`build-plugins: ${dirs.length - failed}/${dirs.length} built in ${secs} s`);
if (failed > 0 || dirs.length === 0) process.exit(1);
