/* test_fence_sql.c: the SQL that proto/README.md documents for storage in
 * other languages is the SQL fenced-kv runs. Every statement of
 * examples/fenced-kv/sql.h must appear in the README, whitespace aside; so
 * an edit to either one that is not made to the other fails here. (fenced-kv
 * itself exercises the statements: test_fencedkv.) */
#include <check.h>
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

static char *readme;

static void load_readme(void) {
  const char *src = getenv("PICKET_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/proto/README.md", src ? src : ".");
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  readme = calloc(1, (size_t)n + 1);
  ck_assert_uint_eq(fread(readme, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  squeeze(readme);
}

static int documented(const char *sql) {
  char *s = strdup(sql);
  int found = strstr(readme, squeeze(s)) != NULL;
  free(s);
  return found;
}

START_TEST(test_statements_documented) {
  load_readme();
  const char *all[] = {FKV_SQL_PRAGMAS, FKV_SQL_SCHEMA,      FKV_SQL_BEGIN,   FKV_SQL_HIGHEST,
                       FKV_SQL_VERSION, FKV_SQL_SET_HIGHEST, FKV_SQL_PUT,     FKV_SQL_COMMIT,
                       FKV_SQL_GET,     FKV_SQL_ROLLBACK};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    ck_assert_msg(documented(all[i]), "proto/README.md lacks fenced-kv's statement:\n%s", all[i]);
  /* The check itself: a statement that is not there is not found. */
  ck_assert(!documented("UPDATE fences SET highest = 0;"));
  free(readme);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fence_sql");
  TCase *tc = tcase_create("readme");
  tcase_add_test(tc, test_statements_documented);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
