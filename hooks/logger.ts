// The log sink hooks/ writes to. The runtime passes its own (runtime/log.ts); hooks/ never imports
// the runtime, so the dependency runs one way.
export type LogLevel = "debug" | "info" | "warn" | "error";
export type HookLogger = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;
export const silentLogger: HookLogger = () => undefined;
