/* test_fence_sql.c: the SQL that proto/README.md documents for storage in
 * other languages is the SQL fenced-kv runs. Every statement of
 * examples/fenced-kv/sql.h must appear in the README, whitespace aside; so
 * an edit to either one that is not made to the other fails here. (fenced-kv
 * itself exercises the statements: test_fencedkv; the PostgreSQL blocks run
 * in test_fencedkv_pgsql.) The user-facing section "Checking fences in your
 * storage" (docs/checking-fences.md) repeats the
 * core statements: they must be the same ones. */
#include <check.h>

#include "harness.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql.h"

/* Collapses every run of whitespace into one space, in place. */
static char *squeeze(char *s) {
  char *w = s;
  int space = 0;
  for (char *r = s; *r; r++) {
    if (isspace((unsigned char)*r)) {
      space = 1;
      continue;
    }
    if (space && w != s) *w++ = ' ';
    space = 0;
    *w++ = *r;
  }
  *w = '\0';
  return s;
}

/* The text of a file of the source tree (malloc'd), or NULL if missing. */
static char *source_file(const char *rel) {
  const char *src = getenv("PICKET_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", src ? src : ".", rel);
  FILE *f = fopen(path, "r");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = calloc(1, (size_t)n + 1);
  ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return text;
}

static char *readme;

static void load_readme(void) {
  readme = source_file("proto/README.md");
  ck_assert_msg(readme != NULL, "cannot open proto/README.md");
  squeeze(readme);
}

static int contains(const char *squeezed, const char *sql) {
  char *s = strdup(sql);
  int found = strstr(squeezed, squeeze(s)) != NULL;
  free(s);
  return found;
}

static int documented(const char *sql) { return contains(readme, sql); }

START_TEST(test_statements_documented) {
  load_readme();
  const char *all[] = {FKV_SQL_PRAGMAS,       FKV_SQL_SCHEMA,        FKV_SQL_HAS_LOCK_NAME,
                       FKV_SQL_ADD_LOCK_NAME, FKV_SQL_BEGIN,         FKV_SQL_KEY,
                       FKV_SQL_HIGHEST,       FKV_SQL_COUNT_LOCKS,   FKV_SQL_SET_HIGHEST,
                       FKV_SQL_PUT,           FKV_SQL_COMMIT,        FKV_SQL_GET,
                       FKV_SQL_ROLLBACK};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    ck_assert_msg(documented(all[i]), "proto/README.md lacks fenced-kv's statement:\n%s", all[i]);
  /* The check itself: a statement that is not there is not found. */
  ck_assert(!documented("UPDATE fences SET highest = 0;"));
  free(readme);
}
END_TEST

/* The PostgreSQL admit statement as proto/README.md has it: the lines after
 * the "-- pg:admit" comment line, up to the end of its code block. */
static char *pg_admit(void) {
  char *text = source_file("proto/README.md");
  ck_assert_ptr_nonnull(text);
  char *start = strstr(text, "-- pg:admit");
  ck_assert_ptr_nonnull(start);
  start = strchr(start, '\n') + 1;
  char *end = strstr(start, "```");
  ck_assert_ptr_nonnull(end);
  char *stmt = strndup(start, (size_t)(end - start));
  free(text);
  return stmt;
}

START_TEST(test_user_section_matches) {
  const char *files[] = {"docs/checking-fences.md"};
  const char *core[] = {FKV_SQL_BEGIN, FKV_SQL_HIGHEST, FKV_SQL_SET_HIGHEST, FKV_SQL_PUT,
                        FKV_SQL_COMMIT};
  char *admit = pg_admit();
  int checked = 0;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char *text = source_file(files[i]);
    if (text == NULL || strstr(text, "# Checking fences in your storage") == NULL) {
      free(text);
      continue;
    }
    squeeze(text);
    for (size_t k = 0; k < sizeof core / sizeof core[0]; k++)
      ck_assert_msg(contains(text, core[k]), "%s lacks fenced-kv's statement:\n%s", files[i],
                    core[k]);
    ck_assert_msg(contains(text, admit), "%s lacks proto/README.md's pg:admit:\n%s", files[i],
                  admit);
    checked++;
    free(text);
  }
  free(admit);
  ck_assert_msg(checked > 0, "no file has the section \"Checking fences in your storage\"");
}
END_TEST

int main(void) {
  Suite *s = suite_create("fence_sql");
  TCase *tc = tcase_create("readme");
  tcase_add_test(tc, test_statements_documented);
  tcase_add_test(tc, test_user_section_matches);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
