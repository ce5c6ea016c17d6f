// Hostile (C with wasi-libc): every way a WASI program reaches the host. hookbox's WASI has no
// preopened directories, no environment, no arguments: each attempt must fail with an errno, while
// clocks and random bytes work. `quit` calls exit(3) (WASI proc_exit), which must end only the call.
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXTISM(name) __attribute__((import_module("extism:host/env"), import_name(#name)))
EXTISM(alloc) uint64_t extism_alloc(uint64_t len);
EXTISM(store_u8) void store_u8(uint64_t offset, uint8_t byte);
EXTISM(output_set) void output_set(uint64_t offset, uint64_t len);

extern char **environ;

static int open_errno(const char *path, const char *mode) {
  errno = 0;
  FILE *f = fopen(path, mode);
  if (f) {
    fclose(f);
    return 0;
  }
  return errno;
}

__attribute__((export_name("command_probe"))) int32_t command_probe(void) {
  int envs = 0;
  for (char **e = environ; e && *e; e++) envs++;
  errno = 0;
  DIR *d = opendir(".");
  int dir_errno = d ? 0 : errno;
  if (d) closedir(d);
  char buf[16];
  errno = 0;
  ssize_t got = read(0, buf, sizeof buf);
  int stdin_errno = got < 0 ? errno : 0;
  uint8_t random[8] = {0};
  int random_ok = getentropy(random, sizeof random) == 0;
  struct timespec ts = {0, 0};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char out[512];
  int len = snprintf(out, sizeof out,
                     "{\"read_etc_passwd\":%d,\"write_tmp\":%d,\"read_relative\":%d,\"opendir\":%d,\"stdin_read\":%zd,\"stdin_errno\":%d,"
                     "\"env_count\":%d,\"home\":%s,\"random_ok\":%d,\"time\":%lld,\"monotonic_ok\":%d}",
                     open_errno("/etc/passwd", "r"), open_errno("/tmp/hookbox-wasiprobe", "w"), open_errno("manifest.json", "r"), dir_errno,
                     got, stdin_errno, envs, getenv("HOME") ? "true" : "null", random_ok, (long long)time(NULL),
                     ts.tv_sec > 0 || ts.tv_nsec > 0);
  uint64_t offset = extism_alloc((uint64_t)len);
  for (int i = 0; i < len; i++) store_u8(offset + (uint64_t)i, (uint8_t)out[i]);
  output_set(offset, (uint64_t)len);
  return 0;
}

__attribute__((export_name("command_quit"))) int32_t command_quit(void) {
  exit(3);
}
