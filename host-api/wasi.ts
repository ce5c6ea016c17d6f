// A capability-free WASI (wasi_snapshot_preview1) for plugins built by standard WASI toolchains
// (C with wasi-libc, Rust std, TinyGo, ...): no preopened directories, empty args and environment,
// clocks and random bytes allowed, stdout/stderr into the plugin's log. Every other call answers an
// errno; nothing reaches the host's files, network or processes. Extism's own `useWasi` would use
// node:wasi (host directories, process exit), so this table is given to the sandbox instead.
//
// WASI passes pointers into the plugin's own linear memory (not Extism's kernel memory): the sandbox
// hands in `memory()`, served in the thread where the instance lives (a worker thread serves its
// own: runtime/sandbox/worker-thread.ts); while it is undefined (a start function, before the
// instance exists) every call that must touch memory answers ENOSYS.

/** The import module standard toolchains emit. */
export const WASI_MODULE = "wasi_snapshot_preview1";

// errno values of wasi_snapshot_preview1.
const SUCCESS = 0;
const BADF = 8;
const FAULT = 21;
const INVAL = 28;
/** Bytes one fd_write takes (the rest is a short write); iovecs one call may name (POSIX IOV_MAX). */
export const MAX_WRITE_BYTES = 64 * 1024;
const MAX_IOVECS = 1024;
const NOSYS = 52;
const NOTSUP = 58;
const SPIPE = 70;
const NOTCAPABLE = 76;

const FILETYPE_CHARACTER_DEVICE = 2;
const RIGHT_FD_WRITE = 1n << 6n;
const MAX_RANDOM_BYTES = 1024 * 1024;

export interface WasiHost {
  /** The calling instance's linear memory, when it lives in this thread. */
  memory(): WebAssembly.Memory | undefined;
  /** One line the plugin wrote to stdout (fd 1) or stderr (fd 2). */
  output(fd: 1 | 2, line: string): void;
}

/** Raised by proc_exit: ends the call as a failure that names the exit code. */
export class WasiExit extends Error {
  override name = "WasiExit";
  constructor(readonly code: number) {
    super(`plugin called proc_exit(${code})`);
  }
}

class Fault extends Error {}

type WasiFunction = (...args: any[]) => number;

/** Every wasi_snapshot_preview1 function; each takes its WASI arguments (no Extism CallContext). */
export function createWasi(host: WasiHost): Record<string, WasiFunction> {
  const decoder = new TextDecoder();
  const view = (): DataView => {
    const mem = host.memory();
    if (!mem) throw new NoMemory();
    return new DataView(mem.buffer);
  };
  const check = (v: DataView, ptr: number, len: number) => {
    if (ptr < 0 || len < 0 || ptr + len > v.byteLength) throw new Fault();
  };
  const u32 = (v: DataView, ptr: number, value: number) => (check(v, ptr, 4), v.setUint32(ptr, value, true));
  const u64 = (v: DataView, ptr: number, value: bigint) => (check(v, ptr, 8), v.setBigUint64(ptr, value, true));
  // Wraps a function that touches memory: a bad pointer is EFAULT, no memory (yet) is ENOSYS.
  const guarded =
    (fn: (v: DataView, ...args: any[]) => number): WasiFunction =>
    (...args) => {
      try {
        return fn(view(), ...args);
      } catch (err) {
        if (err instanceof Fault || err instanceof RangeError) return FAULT;
        if (err instanceof NoMemory) return NOSYS;
        throw err;
      }
    };
  const zeroSizes = guarded((v, countPtr: number, sizePtr: number) => (u32(v, countPtr, 0), u32(v, sizePtr, 0), SUCCESS));
  const isStdio = (fd: number) => fd === 0 || fd === 1 || fd === 2;
  const pending: Record<1 | 2, string> = { 1: "", 2: "" };

  const fns: Record<string, WasiFunction> = {
    args_sizes_get: zeroSizes,
    environ_sizes_get: zeroSizes,
    args_get: () => SUCCESS,
    environ_get: () => SUCCESS,
    clock_res_get: guarded((v, id: number, resPtr: number) => (id > 3 ? INVAL : (u64(v, resPtr, 1000n), SUCCESS))),
    clock_time_get: guarded((v, id: number, _precision: bigint, timePtr: number) => {
      if (id > 3) return INVAL;
      // 0 realtime; 1 monotonic; 2/3 process/thread CPU time (approximated by the monotonic clock).
      const ns = id === 0 ? BigInt(Date.now()) * 1_000_000n : BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
      u64(v, timePtr, ns);
      return SUCCESS;
    }),
    random_get: guarded((v, buf: number, len: number) => {
      if (len > MAX_RANDOM_BYTES) return INVAL;
      check(v, buf, len);
      const bytes = new Uint8Array(v.buffer as ArrayBuffer, buf, len);
      for (let at = 0; at < len; at += 65536) crypto.getRandomValues(bytes.subarray(at, Math.min(len, at + 65536)));
      return SUCCESS;
    }),
    // A short write, as a pipe makes: at most MAX_WRITE_BYTES per call (libc writes the rest in
    // further calls, each charged and a clock check), so one call cannot hold the thread for
    // seconds decoding gigabytes (120 iovecs of 4 MiB each over the same memory did).
    fd_write: guarded((v, fd: number, iovs: number, iovsLen: number, nwrittenPtr: number) => {
      if (fd !== 1 && fd !== 2) return BADF;
      if (iovsLen > MAX_IOVECS) return INVAL;
      let total = 0;
      let text = "";
      for (let i = 0; i < iovsLen && total < MAX_WRITE_BYTES; i++) {
        check(v, iovs + i * 8, 8);
        const ptr = v.getUint32(iovs + i * 8, true);
        const len = Math.min(v.getUint32(iovs + i * 8 + 4, true), MAX_WRITE_BYTES - total);
        check(v, ptr, len);
        text += decoder.decode(new Uint8Array(v.buffer, ptr, len), { stream: true });
        total += len;
      }
      // One log entry per complete line; a partial line waits for its newline (or the 4 KiB cap).
      const lines = (pending[fd] + text).split("\n");
      pending[fd] = lines.pop()!;
      if (pending[fd].length > 4096) lines.push(pending[fd]), (pending[fd] = "");
      for (const line of lines) host.output(fd, line);
      u32(v, nwrittenPtr, total);
      return SUCCESS;
    }),
    // stdio are character devices that may only be written: wasi-libc then line-buffers stdout.
    fd_fdstat_get: guarded((v, fd: number, statPtr: number) => {
      if (!isStdio(fd)) return BADF;
      check(v, statPtr, 24);
      v.setUint8(statPtr, FILETYPE_CHARACTER_DEVICE);
      v.setUint16(statPtr + 2, 0, true);
      v.setBigUint64(statPtr + 8, fd === 0 ? 0n : RIGHT_FD_WRITE, true);
      v.setBigUint64(statPtr + 16, 0n, true);
      return SUCCESS;
    }),
    fd_seek: (fd: number) => (isStdio(fd) ? SPIPE : BADF),
    fd_tell: (fd: number) => (isStdio(fd) ? SPIPE : BADF),
    fd_close: (fd: number) => (isStdio(fd) ? SUCCESS : BADF),
    fd_sync: (fd: number) => (isStdio(fd) ? SUCCESS : BADF),
    fd_datasync: (fd: number) => (isStdio(fd) ? SUCCESS : BADF),
    // No preopened directories: BADF on fd 3 ends a libc's preopen scan.
    fd_prestat_get: () => BADF,
    fd_prestat_dir_name: () => BADF,
    sched_yield: () => SUCCESS,
    poll_oneoff: () => NOTSUP,
    proc_exit: (code: number) => {
      throw new WasiExit(code);
    },
    proc_raise: () => NOSYS,
  };
  // Everything else exists (so modules link) and refuses: files and sockets are never reachable.
  for (const name of FD_FUNCTIONS) fns[name] ??= () => BADF;
  for (const name of PATH_AND_SOCK_FUNCTIONS) fns[name] ??= () => NOTCAPABLE;
  return fns;
}

class NoMemory extends Error {}

const FD_FUNCTIONS = [
  "fd_advise",
  "fd_allocate",
  "fd_fdstat_set_flags",
  "fd_fdstat_set_rights",
  "fd_filestat_get",
  "fd_filestat_set_size",
  "fd_filestat_set_times",
  "fd_pread",
  "fd_pwrite",
  "fd_read",
  "fd_readdir",
  "fd_renumber",
];
const PATH_AND_SOCK_FUNCTIONS = [
  "path_create_directory",
  "path_filestat_get",
  "path_filestat_set_times",
  "path_link",
  "path_open",
  "path_readlink",
  "path_remove_directory",
  "path_rename",
  "path_symlink",
  "path_unlink_file",
  "sock_accept",
  "sock_recv",
  "sock_send",
  "sock_shutdown",
];

/** Names a module may import from wasi_snapshot_preview1. */
export const WASI_FUNCTION_NAMES: ReadonlySet<string> = new Set(Object.keys(createWasi({ memory: () => undefined, output: () => undefined })));
