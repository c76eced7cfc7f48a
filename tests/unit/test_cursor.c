/* Unit tests of the listing cursor's text (server/store/cursor.c): what a
 * backend writes reads back the same, and what it could not have written
 * for the listing's prefix (another prefix's name, a bad kind or slot) is
 * refused, which is what keeps other tenants' names out of listings. */
#include <check.h>
#include <string.h>

#include "cursor.h"
#include "harness.h"

static int read_back(const char *text, const char *prefix, int *slot, char *member) {
  store_cursor c;
  snprintf(c.text, sizeof c.text, "%s", text);
  return store_cursor_read(&c, prefix, slot, member);
}

START_TEST(round_trip) {
  store_cursor c;
  char member[PICKET_PROTO_NAME_MAX + 3];
  int slot;
  store_cursor_write(&c, 12, "a.one l");
  ck_assert_str_eq(c.text, "12-l-a.one");
  ck_assert_int_eq(store_cursor_read(&c, "a.", &slot, member), 0);
  ck_assert_int_eq(slot, 12);
  ck_assert_str_eq(member, "a.one l");
  store_cursor_write(&c, 7, "");
  ck_assert_str_eq(c.text, "7");
  ck_assert_int_eq(store_cursor_read(&c, "a.", &slot, member), 0);
  ck_assert_int_eq(slot, 7);
  ck_assert_str_eq(member, "");
  /* an election's member, in its "/e/" twin range */
  store_cursor_write(&c, 0, "/e/a.el l");
  ck_assert_int_eq(store_cursor_read(&c, "/e/a.", &slot, member), 0);
  ck_assert_str_eq(member, "/e/a.el l");
  /* the longest name fits */
  char name[PICKET_PROTO_NAME_MAX + 3];
  memset(name, 'x', PICKET_PROTO_NAME_MAX);
  strcpy(name + PICKET_PROTO_NAME_MAX, " s");
  store_cursor_write(&c, 16383, name);
  ck_assert_int_eq(store_cursor_read(&c, "x", &slot, member), 0);
  ck_assert_str_eq(member, name);
  ck_assert_int_eq(read_back("", "a.", &slot, member), 0); /* the start */
  ck_assert_str_eq(member, "");
}
END_TEST

START_TEST(refused) {
  char member[PICKET_PROTO_NAME_MAX + 3];
  int slot;
  static const char *const bad[] = {
      "0-l-b.alpha",   /* another prefix's name */
      "0-l-/e/b.x",    /* ...and another prefix's election */
      "0-e-a.x",       /* not a kind the index keeps */
      "0-l-",          /* no name */
      "0-l-a.$",       /* not a name */
      "0-l-a./x",      /* a '/' is no name byte */
      "16384-l-a.x",   /* a slot past any store's */
      "-1", "x", "0~a.", "0-la.x", "0-l-/e/a.x/e/b"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_msg(read_back(bad[i], "a.", &slot, member) < 0, "%s was read", bad[i]);
  /* an election name longer than elections allow */
  char longel[PICKET_PROTO_NAME_MAX + 16] = "0-l-/e/";
  memset(longel + 7, 'q', PICKET_PROTO_ELECTION_NAME_MAX + 1);
  ck_assert_int_lt(read_back(longel, "/e/", &slot, member), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cursor");
  TCase *tc = tcase_create("cursor");
  tcase_add_test(tc, round_trip);
  tcase_add_test(tc, refused);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
