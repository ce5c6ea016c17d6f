// A database file the process may read but not write (its mode, its directory's) is refused when it
// is opened, naming the file: it used to open fine, pass /readyz and answer every write with a 500.
// Run as an unprivileged user (setpriv), which needs root: root writes whatever the mode says.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const hasSetpriv = spawnSync("setpriv", ["--version"]).status === 0;
const skip = "Deno" in globalThis || process.getuid?.() !== 0 || !hasSetpriv ? "needs Node, root and setpriv" : false;

describe("storage: a database this process cannot write", { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), "hookbox-readonly-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("is refused at open, naming the file, where a writable one opens", async () => {
    const path = join(dir, "ro.db");
    // Opened (and closed) by a process of its own: this one's connections would linger.
    const open = (...asUser: string[]) => {
      const script = `import("./runtime/storage/db.ts").then((m) => m.openStorage(${JSON.stringify(`file:${path}`)})).then((s) => s.close()).then(() => console.log("opened"), (e) => console.log(e.message))`;
      const argv = [process.execPath, "--import", "tsx", "--input-type=module", "-e", script];
      return asUser.length > 0 ? execFileSync("setpriv", [...asUser, ...argv], { cwd: root, encoding: "utf8" }) : execFileSync(argv[0]!, argv.slice(1), { cwd: root, encoding: "utf8" });
    };
    assert.equal(open().trim(), "opened");
    for (const f of readdirSync(dir)) chmodSync(join(dir, f), 0o444);
    chmodSync(dir, 0o555);
    const out = open("--reuid=65534", "--regid=65534", "--clear-groups").trim();
    assert.match(out, /^the database .*ro\.db cannot be written by this process: .*ro\.db is read-only to it/);
  });

  // Root writes whatever a mode says, but not on a read-only mount (a Docker :ro volume): there the
  // open failed with a bare SQLITE_CANTOPEN (found by an outside review). A tmpfs in a mount
  // namespace of its own (unshare), remounted read-only after the database was made on it.
  const canUnshare = spawnSync("unshare", ["-m", "true"]).status === 0;
  it("is refused for root too on a read-only mount", { skip: canUnshare ? false : "needs unshare -m" }, () => {
    const mount = mkdtempSync(join(dir, "mnt-"));
    const open = (path: string) =>
      `${JSON.stringify(process.execPath)} --import tsx --input-type=module -e ${JSON.stringify(`import("./runtime/storage/db.ts").then((m) => m.openStorage("file:${path}")).then((s) => s.close()).then(() => console.log("opened"), (e) => console.log(e.message))`)}`;
    const path = join(mount, "ro.db");
    const script = `mount -t tmpfs none ${mount} && ${open(path)} && mount -o remount,ro ${mount} && ${open(path)}`;
    const out = execFileSync("unshare", ["-m", "sh", "-c", script], { cwd: root, encoding: "utf8" }).trim().split("\n");
    assert.equal(out[0], "opened");
    assert.match(out[1]!, /^the database .*ro\.db cannot be written by this process: .*ro\.db is read-only to it/);
  });
});
