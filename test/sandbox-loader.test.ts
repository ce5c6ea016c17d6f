// Hostile plugin folders (issue 9, loader class): a manifest that is a FIFO or a link to /dev/zero,
// a plugin.wasm that links out of its folder, oversized files. Each is refused with a one-line
// reason, quickly; and a bad folder that is not even enabled never stops the server from starting.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compilePlugin, MAX_MANIFEST_BYTES, PluginLoadError, readManifest } from "../runtime/plugins/loader.ts";
import { MAX_MODULE_BYTES } from "../runtime/sandbox/instrument.ts";
import { HOSTILE_DIR, startPluginServer, type PluginServer } from "./helpers/plugins.ts";

const LIMITS = { fuel: 1_000_000, memoryPages: 16, timeoutMs: 1_000, maxOutputBytes: 1024 };
const MANIFEST = { name: "x", version: "1", hooks: [] };

describe("loader: hostile plugin folders", () => {
  let root = "";
  const folder = (name: string) => {
    const dir = join(root, name);
    mkdirSync(dir);
    return dir;
  };
  before(() => void (root = mkdtempSync(join(tmpdir(), "hookbox-loader-"))));
  after(() => rmSync(root, { recursive: true, force: true }));

  const refused = async (fn: () => unknown, reason: RegExp) => {
    const t0 = performance.now();
    await assert.rejects(async () => fn(), (e: unknown) => e instanceof PluginLoadError && reason.test(e.message) && !e.message.includes("\n"));
    assert.ok(performance.now() - t0 < 1_000, "refused quickly");
  };

  it("a manifest.json that is a FIFO is refused without blocking", async () => {
    const dir = folder("fifo");
    execFileSync("mkfifo", [join(dir, "manifest.json")]);
    await refused(() => readManifest(dir, "fifo"), /manifest\.json is not a regular file \(a FIFO\)/);
  });

  it("a manifest.json linking to /dev/zero (out of the folder) is refused", async () => {
    const dir = folder("zero");
    symlinkSync("/dev/zero", join(dir, "manifest.json"));
    await refused(() => readManifest(dir, "zero"), /manifest\.json is a symlink out of the plugin folder/);
  });

  it("a manifest.json over 64 KiB is refused", async () => {
    const dir = folder("big");
    writeFileSync(join(dir, "manifest.json"), JSON.stringify({ ...MANIFEST, name: "big", description: "x".repeat(MAX_MANIFEST_BYTES) }));
    await refused(() => readManifest(dir, "big"), /manifest\.json is \d+ bytes, over the limit of 65536 bytes/);
  });

  it("a plugin.wasm linking out of its folder is refused; a link inside it is followed", async () => {
    const dir = folder("escape");
    const outside = join(root, "outside.wasm");
    copyFileSync(join(HOSTILE_DIR, "trap", "plugin.wasm"), outside);
    symlinkSync(outside, join(dir, "plugin.wasm"));
    const manifest = { ...MANIFEST, name: "escape" };
    await refused(() => compilePlugin(dir, { ...manifest, hooks: [], unknown_hooks: [], unknown_fields: [], commands: [], capabilities: [], limits: {}, tools: [] }, LIMITS), /plugin\.wasm is a symlink out of the plugin folder/);
    const inside = folder("inside");
    copyFileSync(outside, join(inside, "real.wasm"));
    symlinkSync("real.wasm", join(inside, "plugin.wasm"));
    await compilePlugin(inside, { ...manifest, name: "inside", hooks: [], unknown_hooks: [], unknown_fields: [], commands: [], capabilities: [], limits: {}, tools: [] }, LIMITS);
  });

  // The hint runs on the runtime in use (the npm form was shown on Deno too: an outside parity probe).
  it("a missing plugin.wasm says how to build it on this runtime", async () => {
    const dir = folder("unbuilt");
    const cli = "Deno" in globalThis ? "deno task hookbox" : "npm run hookbox --";
    await refused(
      () => compilePlugin(dir, { ...MANIFEST, name: "unbuilt", hooks: [], unknown_hooks: [], unknown_fields: [], commands: [], capabilities: [], limits: {}, tools: [] }, LIMITS),
      new RegExp(`^plugin\\.wasm is missing \\(build it: ${cli} plugins build unbuilt\\)$`),
    );
  });

  it("a plugin.wasm over the module cap is refused before it is read whole", async () => {
    const dir = folder("huge");
    writeFileSync(join(dir, "plugin.wasm"), new Uint8Array(MAX_MODULE_BYTES + 1));
    await refused(
      () => compilePlugin(dir, { ...MANIFEST, name: "huge", hooks: [], unknown_hooks: [], unknown_fields: [], commands: [], capabilities: [], limits: {}, tools: [] }, LIMITS),
      /plugin\.wasm is 4194305 bytes, over the limit of 4194304 bytes/,
    );
  });
});

describe("loader: a bad folder that is not enabled never blocks start-up", () => {
  let s: PluginServer;
  let dir = "";
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "hookbox-loader-"));
    mkdirSync(join(dir, "fifo"));
    execFileSync("mkfifo", [join(dir, "fifo", "manifest.json")]);
    mkdirSync(join(dir, "zero"));
    symlinkSync("/dev/zero", join(dir, "zero", "manifest.json"));
    mkdirSync(join(dir, "trap"));
    for (const f of ["manifest.json", "plugin.wasm"]) copyFileSync(join(HOSTILE_DIR, "trap", f), join(dir, "trap", f));
    s = await startPluginServer({ dir, enabled: ["trap"] });
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("starts, lists the bad folders as failed with their reason, runs the good one", async () => {
    const res = await s.api("GET", "/v1/plugins");
    assert.equal(res.status, 200);
    const byName = Object.fromEntries((res.body.plugins as Array<{ name: string; status: string; reason: string | null }>).map((p) => [p.name, p]));
    assert.equal(byName.fifo?.status, "failed");
    assert.match(byName.fifo!.reason!, /not a regular file \(a FIFO\)/);
    assert.equal(byName.zero?.status, "failed");
    assert.match(byName.zero!.reason!, /symlink out of the plugin folder/);
    assert.equal(byName.trap?.status, "active");
  });

  it("is ready: plugins that failed to load are counted in /readyz's body, not made a 503", async () => {
    const res = await fetch(`${s.url}/readyz`);
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.deepEqual(body.checks, { database: "ok", plugins: "ok" });
    assert.deepEqual(body.plugins, { active: 1, failed: 2, quarantined: 0, disabled: 0 });
  });
});
