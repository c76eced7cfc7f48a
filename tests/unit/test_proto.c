/* Unit tests of picket_proto: the validation rules every component shares. */
#include <check.h>

#include "harness.h"
#include <string.h>

#include "picket_proto.h"

#define V(f, s) f(s, strlen(s))

START_TEST(names) {
  char n200[201], n201[202];
  memset(n200, 'a', 200), n200[200] = '\0';
  memset(n201, 'a', 201), n201[201] = '\0';
  ck_assert(V(picket_proto_name_valid, "inventory-sync"));
  ck_assert(V(picket_proto_name_valid, "A.b_c:d-9"));
  ck_assert(V(picket_proto_name_valid, n200));
  ck_assert(V(picket_proto_name_valid, "..."));
  ck_assert(V(picket_proto_name_valid, ".a"));
  const char *bad[] = {"", "a b", "a{b", "a}b", "a/b", "a%2Fb", "é", "a\tb", "a*", ".", ".."};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_msg(!V(picket_proto_name_valid, bad[i]), "'%s' accepted", bad[i]);
  ck_assert(!V(picket_proto_name_valid, n201));
  ck_assert(!picket_proto_name_valid("a\0b", 3));
}
END_TEST

START_TEST(names_from_paths) {
  char out[PICKET_PROTO_NAME_MAX + 1];
  const struct {
    const char *seg, *name; /* name NULL: refused */
  } cases[] = {
      {"inventory-sync", "inventory-sync"},
      {"billing.nightly%3Aeu-west-1", "billing.nightly:eu-west-1"},
      {"a%3ab", "a:b"},
      {"%41%2D%5f", "A-_"},
      {"...", "..."},
      {"a%2Fb", NULL}, /* a decoded slash is a bad name, not a path */
      {"a%00b", NULL},
      {"a%253Ab", NULL}, /* decoded once: "a%3Ab" has a '%' */
      {"a%", NULL},
      {"a%3", NULL},
      {"a%g1", NULL},
      {"a%1g", NULL},
      {"%2E", NULL},
      {"%2e.", NULL},
      {"a b", NULL},
      {"", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int len = picket_proto_name_from_path(cases[i].seg, strlen(cases[i].seg), out);
    if (cases[i].name == NULL) {
      ck_assert_msg(len < 0, "'%s' accepted as '%s'", cases[i].seg, out);
    } else {
      ck_assert_msg(len == (int)strlen(cases[i].name) && strcmp(out, cases[i].name) == 0,
                    "'%s' -> %d '%s'", cases[i].seg, len, len >= 0 ? out : "");
    }
  }
  /* 200 bytes after decoding is the limit, however long the segment */
  char seg[3 * 201 + 1] = "";
  for (int i = 0; i < 200; i++) strcat(seg, "%41");
  ck_assert_int_eq(picket_proto_name_from_path(seg, strlen(seg), out), 200);
  strcat(seg, "A");
  ck_assert_int_eq(picket_proto_name_from_path(seg, strlen(seg), out), -1);
}
END_TEST

START_TEST(leases) {
  char l[PICKET_PROTO_LEASE_LEN + 1], m[PICKET_PROTO_LEASE_LEN + 1];
  ck_assert_int_eq(picket_proto_lease_new(l), 0);
  ck_assert_int_eq(picket_proto_lease_new(m), 0);
  ck_assert(V(picket_proto_lease_valid, l));
  ck_assert_str_ne(l, m);
  ck_assert(!V(picket_proto_lease_valid, "0123456789ABCDEF0123456789abcdef"));
  ck_assert(!V(picket_proto_lease_valid, "0123456789abcdef0123456789abcde"));
  ck_assert(!V(picket_proto_lease_valid, "0123456789abcdef0123456789abcdeff"));
  ck_assert(!V(picket_proto_lease_valid, "0123456789abcdef0123456789abcdeg"));
}
END_TEST

START_TEST(owners) {
  ck_assert(V(picket_proto_owner_valid, ""));
  ck_assert(V(picket_proto_owner_valid, "worker-1 on host a"));
  ck_assert(V(picket_proto_owner_valid, "s\xc3\xa9" "bastien \xe6\x9c\xba \xf0\x9f\x94\x92"));
  const char *bad[] = {"a\nb", "a\x7f", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                       "\xc2\x80" /* C1 control */};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_msg(!V(picket_proto_owner_valid, bad[i]), "case %zu accepted", i);
  char o129[130];
  memset(o129, 'o', 129), o129[129] = '\0';
  ck_assert(!V(picket_proto_owner_valid, o129));
  o129[128] = '\0';
  ck_assert(V(picket_proto_owner_valid, o129));
  /* the limit counts characters, as JSON Schema's maxLength does */
  char wide[4 * 129 + 1] = "";
  for (int i = 0; i < 128; i++) strcat(wide, "\xf0\x9f\x94\x92");
  ck_assert(V(picket_proto_owner_valid, wide));
  strcat(wide, "\xc3\xa9");
  ck_assert(!V(picket_proto_owner_valid, wide));
}
END_TEST

START_TEST(fences) {
  int64_t f;
  ck_assert(picket_proto_fence_parse("42", 2, &f) && f == 42);
  ck_assert(picket_proto_fence_parse("9223372036854775807", 19, &f) && f == INT64_MAX);
  const char *bad[] = {"", "0", "-1", "+1", " 1", "1 ", "01", "9223372036854775808",
                       "99999999999999999999", "1e3", "0x10"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_msg(!picket_proto_fence_parse(bad[i], strlen(bad[i]), &f), "'%s' accepted", bad[i]);
}
END_TEST

START_TEST(keys_and_errors) {
  char k[300];
  ck_assert_int_gt(picket_proto_key_lease(k, sizeof k, "picket:", "inv"), 0);
  ck_assert_str_eq(k, "picket:{inv}:lease");
  ck_assert_int_gt(picket_proto_key_fence(k, sizeof k, "p:", "inv"), 0);
  ck_assert_str_eq(k, "p:{inv}:fence");
  ck_assert_int_gt(picket_proto_channel(k, sizeof k, "picket:"), 0);
  ck_assert_str_eq(k, "picket:release");
  ck_assert_int_eq(picket_proto_key_lease(k, 5, "picket:", "inv"), -1);
  ck_assert_str_eq(picket_proto_err_code(PICKET_PROTO_ERR_LOCK_HELD), "lock_held");
  ck_assert_int_eq(picket_proto_err_status(PICKET_PROTO_ERR_LOCK_HELD), 409);
  ck_assert_int_eq(picket_proto_err_status(PICKET_PROTO_ERR_BODY_TOO_LARGE), 413);
  ck_assert_int_eq(picket_proto_err_from_code("store_unavailable"), PICKET_PROTO_ERR_STORE_UNAVAILABLE);
  ck_assert_int_eq(picket_proto_err_from_code("nope"), -1);
  /* One code, one meaning; too_many_waiters and too_many_watchers are
   * the codes of two rows each: 429 for a client at its own bound, 503 for
   * a server at its --max-waiters or --max-watchers. A client maps the
   * code back to the first. */
  for (int e = 0; e < PICKET_PROTO_ERR_COUNT; e++) {
    int back = picket_proto_err_from_code(picket_proto_err_code(e));
    ck_assert_str_eq(picket_proto_err_code(back), picket_proto_err_code(e));
    ck_assert_int_eq(back == e, e != PICKET_PROTO_ERR_TOO_MANY_WAITERS &&
                                    e != PICKET_PROTO_ERR_TOO_MANY_WATCHERS);
  }
}
END_TEST

/* Signed fences: the format is pinned by a vector computed outside picket
 * (python3: hmac.new(bytes(range(32)), b"picket-fence-v1\0k1\0picket:\0"
 * b"inventory-sync\042", hashlib.sha256).hexdigest()), so another
 * language's verifier can be checked against the same bytes. */
START_TEST(fence_tokens) {
  const char file[] =
      "# signing key first\n"
      "k1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"
      "\n"
      "  old\t" "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff  \r\n";
  picket_proto_fence_keys ks;
  char err[200];
  ck_assert_int_eq(picket_proto_fence_keys_parse(file, sizeof file - 1, &ks, err, sizeof err), 0);
  ck_assert_int_eq(ks.n, 2);
  ck_assert_str_eq(ks.keys[1].kid, "old");
  char tok[PICKET_PROTO_FENCE_TOKEN_MAX + 1];
  ck_assert_int_eq(picket_proto_fence_token(&ks.keys[0], "picket:", "inventory-sync", 42, tok), 0);
  ck_assert_str_eq(tok, "v1.k1.112fa84b00300fd99a9de4a5c8b55e076027d493039e951dc45777d035bf0397");
  ck_assert_int_eq(picket_proto_fence_token_verify(&ks, "picket:", "inventory-sync", 42, tok, strlen(tok)), 1);
  /* any other lock, fence, prefix, digit or key id: no */
  ck_assert_int_eq(picket_proto_fence_token_verify(&ks, "picket:", "inventory-syn", 42, tok, strlen(tok)), 0);
  ck_assert_int_eq(picket_proto_fence_token_verify(&ks, "picket:", "inventory-sync", 43, tok, strlen(tok)), 0);
  ck_assert_int_eq(picket_proto_fence_token_verify(&ks, "other:", "inventory-sync", 42, tok, strlen(tok)), 0);
  ck_assert_int_eq(picket_proto_fence_token_verify(&ks, "picket:", "inventory-sync", 42, tok, strlen(tok) - 1), 0);
  char bad[sizeof tok];
  strcpy(bad, tok);
  bad[strlen(bad) - 1] = bad[strlen(bad) - 1] == '7' ? '8' : '7';
  ck_assert_int_eq(picket_proto_fence_token_verify(&ks, "picket:", "inventory-sync", 42, bad, strlen(bad)), 0);
  strcpy(bad, tok);
  memcpy(bad + 3, "kx", 2); /* a key id nobody has */
  ck_assert_int_eq(picket_proto_fence_token_verify(&ks, "picket:", "inventory-sync", 42, bad, strlen(bad)), 0);
  /* rotation: a token of the second key still verifies */
  ck_assert_int_eq(picket_proto_fence_token(&ks.keys[1], "picket:", "x", 9223372036854775807LL, tok), 0);
  ck_assert_int_eq(picket_proto_fence_token_verify(&ks, "picket:", "x", 9223372036854775807LL, tok, strlen(tok)), 1);
  ck_assert_int_eq(picket_proto_fence_token(&ks.keys[0], "picket:", "x", 0, tok), -1);
  /* files that are refused, with the line; never the key */
  struct { const char *text, *want; } refused[] = {
      {"", "no key"},
      {"# only a comment\n", "no key"},
      {"k1\n", "line 1: expected KID"},
      {"k1 0011\n", "line 1: a key is 32 to 64 bytes"},
      {"k/1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", "line 1: a key id"},
      {"k1 zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", "not hex"},
      {"a 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"
       "a 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", "line 2: key id 'a' given twice"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    ck_assert_int_eq(picket_proto_fence_keys_parse(refused[i].text, strlen(refused[i].text), &ks, err, sizeof err), -1);
    ck_assert_msg(strstr(err, refused[i].want) && !strstr(err, "0102030405"), "%s: %s", refused[i].want, err);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("proto");
  TCase *tc = tcase_create("proto");
  tcase_add_test(tc, names);
  tcase_add_test(tc, names_from_paths);
  tcase_add_test(tc, leases);
  tcase_add_test(tc, owners);
  tcase_add_test(tc, fences);
  tcase_add_test(tc, keys_and_errors);
  tcase_add_test(tc, fence_tokens);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
