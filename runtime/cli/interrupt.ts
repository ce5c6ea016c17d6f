// Ctrl-C or SIGTERM during a CLI command (serve has its own: it drains requests): what was started
// is finished, then the command exits 130. A delete's on_session_delete and its plugins' clean-up
// run after its commit: a CLI killed between the two left the plugins' data of the deleted sessions
// until a server's sweep (none if no server runs). A second signal a second or more after the first
// stops the command at once; one within a second is the same Ctrl-C passed on by a wrapper (npm
// forwards the terminal's SIGINT that the whole process group already got).

export interface InterruptGuard {
  /** The first signal received, if any. */
  readonly signal: string | undefined;
  dispose(): void;
}

export function guardInterrupts(say: (line: string) => void): InterruptGuard {
  let signal: string | undefined;
  let first = 0;
  const on = (name: string) => {
    if (signal === undefined) {
      signal = name;
      first = Date.now();
      say(`hookbox: ${name}: finishing what was started, then stopping (${name} again stops at once)`);
    } else if (Date.now() - first >= 1_000) process.exit(130);
  };
  const onInt = () => on("SIGINT");
  const onTerm = () => on("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  return {
    get signal() {
      return signal;
    },
    dispose() {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
    },
  };
}
