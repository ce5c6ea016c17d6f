// `mkdir -p` one level at a time. Node 20's recursive mkdirSync spins forever (full CPU, deaf to
// SIGTERM) where the kernel answers ENOENT for a folder whose parent exists (`/proc/x`); this fails
// there at once with that ENOENT, as Deno's does.
import { mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";

export function makeDirs(dir: string): void {
  const found = statOrNothing(dir);
  // A file in the way was taken for the folder: the database then failed to open, not saying why.
  if (found) {
    if (found.isDirectory()) return;
    throw new Error(`${dir} is a file, not a folder`);
  }
  const parent = dirname(dir);
  if (parent !== dir) makeDirs(parent);
  try {
    mkdirSync(dir);
  } catch (err) {
    // Made meanwhile by another process starting on the same path.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
}

/** The entry at `path`, or undefined when there is none; a file in place of a parent folder (ENOTDIR) is told when the walk reaches it. */
function statOrNothing(path: string): ReturnType<typeof statSync> {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw err;
  }
}
