// How a user runs this CLI, for hints that name a command to paste: the repo defines no `hookbox`
// executable (an outside probe pasted "hookbox plugins call ..." and got "command not found").
export const INVOKED_AS = "Deno" in globalThis ? "deno task hookbox" : "npm run hookbox --";
