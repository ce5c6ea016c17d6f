// hookbox example plugin in C with wasi-libc, built by plugins-wasm/build.mjs with
//   clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 -o plugin.wasm plugin.c
// printf goes through WASI fd_write into the plugin's log; time() and getentropy() use WASI's
// clock and random. hookbox's WASI has no files, no environment and no arguments. The input is
// copied in by hookbox's hookbox_input_read; output goes through Extism's kernel (`extism:host/env`). Exports return 0 on success; anything else is a
// failure whose text is the message given to error_set.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXTISM(name) __attribute__((import_module("extism:host/env"), import_name(#name)))
EXTISM(input_length) uint64_t input_length(void);
EXTISM(input_load_u8) uint8_t input_load_u8(uint64_t offset);
EXTISM(alloc) uint64_t extism_alloc(uint64_t len);
EXTISM(store_u8) void store_u8(uint64_t offset, uint8_t byte);
EXTISM(output_set) void output_set(uint64_t offset, uint64_t len);
EXTISM(error_set) void error_set(uint64_t offset);
__attribute__((import_module("extism:host/user"), import_name("hookbox_input_read"))) uint64_t hookbox_input_read(uint64_t dest, uint64_t len);

static char *input;

/*
 * The call's whole input as a NUL-terminated string (a payload can be large: on_session_delete
 * lists every deleted id), or NULL when the plugin's memory cannot hold it. One host call copies it
 * (hookbox_input_read); where that answers 0, it is read a byte at a time.
 */
static const char *read_input(void) {
  uint64_t n = input_length();
  free(input);
  input = malloc(n + 1);
  if (!input) return NULL;
  if (hookbox_input_read((uint64_t)(uintptr_t)input, n) != n) {
    for (uint64_t i = 0; i < n; i++) input[i] = (char)input_load_u8(i);
  }
  input[n] = 0;
  return input;
}

static uint64_t store(const char *text, size_t len) {
  uint64_t offset = extism_alloc(len);
  for (size_t i = 0; i < len; i++) store_u8(offset + i, (uint8_t)text[i]);
  return offset;
}

static int32_t fail(const char *msg) {
  error_set(store(msg, strlen(msg)));
  return 1;
}

/* Copies the JSON string field "key" (escapes kept as written, quotes dropped) into out. */
static void string_field(const char *json, const char *key, char *out, size_t cap) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
  const char *at = strstr(json, pattern);
  size_t n = 0;
  if (at) {
    for (at += strlen(pattern); *at && *at != '"' && n + 2 < cap; at++) {
      if (*at == '\\' && at[1]) out[n++] = *at++;
      out[n++] = *at;
    }
  }
  out[n] = 0;
}

__attribute__((export_name("post_llm_call"))) int32_t post_llm_call(void) {
  char session[128];
  const char *in = read_input();
  if (!in) return fail("the input is larger than the plugin's memory");
  string_field(in, "session_id", session, sizeof session);
  printf("model answered in session %s\n", session);
  return 0;
}

__attribute__((export_name("command_hello_c"))) int32_t command_hello_c(void) {
  char args[256];
  const char *in = read_input();
  if (!in) return fail("the input is larger than the plugin's memory");
  string_field(in, "raw_args", args, sizeof args);
  if (strcmp(args, "fail") == 0) return fail("asked to fail (raw_args was \"fail\")");
  uint32_t lucky = 0;
  if (getentropy(&lucky, sizeof lucky) != 0) return 2;
  time_t now = time(NULL);
  printf("greeting %s\n", args[0] ? args : "(nobody)");
  fprintf(stderr, "clock says %lld\n", (long long)now);
  char out[512];
  int len = snprintf(out, sizeof out, "{\"text\":\"hello from C%s%s (lucky number %u, year %d)\"}", args[0] ? ", " : "", args,
                     (unsigned)(lucky % 100), 1970 + (int)(now / 31556952));
  output_set(store(out, (size_t)len), (uint64_t)len);
  return 0;
}
