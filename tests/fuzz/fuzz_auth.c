/* fuzz_auth.c: the fuzz target over the --auth-file parser (server/auth.c):
 * any bytes are a file; the parser must refuse it with a message that
 * names a line, or give a table whose every token answers for itself.
 * Built with libFuzzer as fuzz_auth (-DPICKET_FUZZ=ON), and with
 * fuzz_replay.c as fuzz_auth_replay, which runs tests/fuzz/auth_corpus in
 * every ctest run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) { return 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[400] = "";
  auth_table *t = auth_parse((const char *)data, size, err, sizeof err);
  if (t == NULL) {
    /* refused: a message, and (inside the size bound) the line it is on */
    if (err[0] == '\0' || (size <= AUTH_FILE_MAX && strncmp(err, "line ", 5) != 0)) {
      fprintf(stderr, "fuzz_auth: refused without a line: '%s'\n", err);
      abort();
    }
    return 0;
  }
  int lines = 1;
  for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
  if (auth_table_count(t) > lines || auth_table_count(t) > AUTH_TOKENS_MAX) {
    fprintf(stderr, "fuzz_auth: %d tokens from %d lines\n", auth_table_count(t), lines);
    abort();
  }
  /* Resolving against it never crashes, and a non-Bearer value never
   * authenticates. */
  auth_set_table(t);
  auth_principal *who = NULL;
  char msg[200];
  quota_deny why;
  if (auth_resolve("Basic eDp5", &who, msg, sizeof msg, &why) == 0) abort();
  if (auth_resolve("Bearer x", &who, msg, sizeof msg, &why) == 0) {
    auth_covers(who, "billing.x");
    auth_put(who);
  }
  auth_set_table(NULL);
  auth_table_free(t);
  return 0;
}
