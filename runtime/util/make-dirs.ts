// `mkdir -p` one level at a time. Node 20's recursive mkdirSync spins forever (full CPU, deaf to
// SIGTERM) where the kernel answers ENOENT for a folder whose parent exists (`/proc/x`); this fails
// there at once with that ENOENT, as Deno's does.
import { existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";

export function makeDirs(dir: string): void {
  if (existsSync(dir)) return;
  const parent = dirname(dir);
  if (parent !== dir) makeDirs(parent);
  try {
    mkdirSync(dir);
  } catch (err) {
    // Made meanwhile by another process starting on the same path.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
}
