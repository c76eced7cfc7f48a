/* fuzz_replay.c: a main() for the fuzz target without libFuzzer, so the
 * normal (gcc) build runs every seed input through fuzz_api.c's checks in
 * each ctest run, and anyone can replay a crash file from a long fuzzing
 * session under gdb or valgrind:
 *
 *   fuzz_api_replay FILE|DIR...
 *
 * Directories are read one level deep, in name order. A broken reply
 * aborts (see fuzz_api.c); running no input at all is a failure too, so an
 * emptied corpus cannot pass unnoticed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs one file; returns 0, or -1 (with a message) if it cannot be read. */
static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  size_t cap = 4096, len = 0, n;
  uint8_t *buf = malloc(cap);
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (nb == NULL) free(buf);
      buf = nb;
    }
  }
  int bad = ferror(f) || buf == NULL;
  fclose(f);
  if (bad) {
    fprintf(stderr, "%s: cannot read\n", path);
    free(buf);
    return -1;
  }
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  int runs = 0, errors = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      struct dirent **names;
      int n = scandir(argv[i], &names, NULL, by_name);
      if (n < 0) {
        perror(argv[i]);
        errors++;
        continue;
      }
      for (int k = 0; k < n; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
        if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
          if (run_file(path) < 0) errors++;
          else runs++;
        }
        free(names[k]);
      }
      free(names);
    } else if (run_file(argv[i]) < 0) {
      errors++;
    } else {
      runs++;
    }
  }
  printf("fuzz_api_replay: %d inputs replayed, %d unreadable\n", runs, errors);
  return runs > 0 && errors == 0 ? 0 : 1;
}
