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

/* Signed fences: the format is pinned by vectors computed outside picket
 * (python3: hmac.new(bytes(range(32)), b"picket-fence-v2\0lock\0k1\0"
 * b"picket:\0inventory-sync\042", hashlib.sha256).hexdigest(); v1 without
 * the kind), so another language's verifier can be checked against the
 * same bytes. */
#define V2_LOCK "v2.lock.k1.551b2f98ebf05e8cfb8f5aef8fe2b6fdabdc5e8c249d9958074648c0839be91e"
#define V1_LOCK "v1.k1.112fa84b00300fd99a9de4a5c8b55e076027d493039e951dc45777d035bf0397"
#define VERIFY(ks, prefix, lock, fence, kinds, tok) \
  picket_proto_fence_token_verify(ks, prefix, lock, fence, kinds, tok, strlen(tok))
START_TEST(fence_tokens) {
  const char file[] =
      "# signing key first\n"
      "k1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"
      "\n"
      "  old\t" "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff  \r\n";
  picket_proto_fence_keys ks;
  char err[200];
  const unsigned LOCK = PICKET_PROTO_FENCE_KIND_LOCK;
  ck_assert_int_eq(picket_proto_fence_keys_parse(file, sizeof file - 1, &ks, err, sizeof err), 0);
  ck_assert_int_eq(ks.n, 2);
  ck_assert_int_eq(ks.accept_v1, 0);
  ck_assert_str_eq(ks.keys[1].kid, "old");
  char tok[PICKET_PROTO_FENCE_TOKEN_MAX + 1];
  ck_assert_int_eq(picket_proto_fence_token(&ks.keys[0], LOCK, "picket:", "inventory-sync", 42, tok), 0);
  ck_assert_str_eq(tok, V2_LOCK);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 42, LOCK, tok), 1);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 42, PICKET_PROTO_FENCE_KIND_BY_NAME, tok), 1);
  /* any other lock, fence, prefix, digit, kind or key id: no */
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-syn", 42, LOCK, tok), 0);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 43, LOCK, tok), 0);
  ck_assert_int_eq(VERIFY(&ks, "other:", "inventory-sync", 42, LOCK, tok), 0);
  ck_assert_int_eq(picket_proto_fence_token_verify(&ks, "picket:", "inventory-sync", 42, LOCK, tok, strlen(tok) - 1), 0);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 42, PICKET_PROTO_FENCE_KIND_WRITE, tok), 0);
  char bad[sizeof tok];
  strcpy(bad, tok);
  bad[strlen(bad) - 1] = bad[strlen(bad) - 1] == '7' ? '8' : '7';
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 42, LOCK, bad), 0);
  strcpy(bad, tok);
  memcpy(bad + 8, "kx", 2); /* a key id nobody has */
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 42, LOCK, bad), 0);
  strcpy(bad, tok);
  memcpy(bad + 3, "read", 4); /* the kind rewritten: the MAC says lock */
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 42, PICKET_PROTO_FENCE_KIND_READ, bad), 0);
  /* rotation: a token of the second key still verifies */
  ck_assert_int_eq(picket_proto_fence_token(&ks.keys[1], LOCK, "picket:", "x", 9223372036854775807LL, tok), 0);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "x", 9223372036854775807LL, LOCK, tok), 1);
  ck_assert_int_eq(picket_proto_fence_token(&ks.keys[0], LOCK, "picket:", "x", 0, tok), -1);
  ck_assert_int_eq(picket_proto_fence_token(&ks.keys[0], 0, "picket:", "x", 1, tok), -1);
  ck_assert_int_eq(picket_proto_fence_token(&ks.keys[0], 3, "picket:", "x", 1, tok), -1);
  /* v1 (no kind): refused unless the verifier turned it on for an upgrade */
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 42, LOCK, V1_LOCK), 0);
  ks.accept_v1 = 1;
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 42, LOCK, V1_LOCK), 1);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "inventory-sync", 43, LOCK, V1_LOCK), 0);
  ks.accept_v1 = 0;
}
END_TEST

/* The kind a lock name's shape says, and each kind's token under it. */
START_TEST(fence_token_kinds) {
  ck_assert_uint_eq(picket_proto_fence_kind_of_name("a"), PICKET_PROTO_FENCE_KIND_LOCK);
  ck_assert_uint_eq(picket_proto_fence_kind_of_name("a:rw"), PICKET_PROTO_FENCE_KIND_WRITE);
  ck_assert_uint_eq(picket_proto_fence_kind_of_name(":rw"), PICKET_PROTO_FENCE_KIND_LOCK);
  ck_assert_uint_eq(picket_proto_fence_kind_of_name("a:rwx"), PICKET_PROTO_FENCE_KIND_LOCK);
  ck_assert_uint_eq(picket_proto_fence_kind_of_name("S:permit:0"), PICKET_PROTO_FENCE_KIND_PERMIT);
  ck_assert_uint_eq(picket_proto_fence_kind_of_name("S:permit:12"), PICKET_PROTO_FENCE_KIND_PERMIT);
  ck_assert_uint_eq(picket_proto_fence_kind_of_name("S:permit:"), PICKET_PROTO_FENCE_KIND_LOCK);
  ck_assert_uint_eq(picket_proto_fence_kind_of_name(":permit:1"), PICKET_PROTO_FENCE_KIND_LOCK);
  ck_assert_uint_eq(picket_proto_fence_kind_of_name("S:permit:1x"), PICKET_PROTO_FENCE_KIND_LOCK);
  ck_assert_str_eq(picket_proto_fence_kind_name(PICKET_PROTO_FENCE_KIND_PERMIT), "permit");
  ck_assert_ptr_null(picket_proto_fence_kind_name(0));
  ck_assert_ptr_null(picket_proto_fence_kind_name(16));
  const char key[] = "k1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";
  picket_proto_fence_keys ks;
  char err[200], tok[PICKET_PROTO_FENCE_TOKEN_MAX + 1];
  ck_assert_int_eq(picket_proto_fence_keys_parse(key, sizeof key - 1, &ks, err, sizeof err), 0);
  static const struct {
    unsigned kind;
    const char *lock, *want;
  } v[] = {
      {PICKET_PROTO_FENCE_KIND_READ, "inventory-sync:rw",
       "v2.read.k1.7e0f7e171cfef68ebd965a94473ea2c79d513d5d32e40847358196dd9fc6c8b7"},
      {PICKET_PROTO_FENCE_KIND_WRITE, "inventory-sync:rw",
       "v2.write.k1.88a433f40a0658a0e685e68808a4ec58a6ca16b97dbe81bb25b34452864781d4"},
      {PICKET_PROTO_FENCE_KIND_PERMIT, "inventory-sync:permit:0",
       "v2.permit.k1.0f5ee9eb23f4e8f36684f8679d0fe0b92da56247b6223aa1eb05b7aeb8891d35"},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    ck_assert_int_eq(picket_proto_fence_token(&ks.keys[0], v[i].kind, "picket:", v[i].lock, 42, tok), 0);
    ck_assert_str_eq(tok, v[i].want);
    ck_assert_int_eq(VERIFY(&ks, "picket:", v[i].lock, 42, v[i].kind, tok), 1);
    /* every other kind refuses it, and so does the name's kind unless it is this one */
    ck_assert_int_eq(VERIFY(&ks, "picket:", v[i].lock, 42, 15u & ~v[i].kind, tok), 0);
    ck_assert_int_eq(VERIFY(&ks, "picket:", v[i].lock, 42, PICKET_PROTO_FENCE_KIND_BY_NAME, tok),
                     v[i].kind != PICKET_PROTO_FENCE_KIND_READ);
  }
  /* a plain lock named like a permit, or like a rwlock's fence lock: its
   * token is a lock's, which the name's kind refuses */
  ck_assert_int_eq(picket_proto_fence_token(&ks.keys[0], PICKET_PROTO_FENCE_KIND_LOCK, "picket:", "S:permit:3", 7, tok), 0);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "S:permit:3", 7, PICKET_PROTO_FENCE_KIND_BY_NAME, tok), 0);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "S:permit:3", 7, PICKET_PROTO_FENCE_KIND_LOCK, tok), 1);
  /* malformed: no kind, an unknown kind, no key id */
  ck_assert_int_eq(VERIFY(&ks, "picket:", "S:permit:3", 7, 15u, "v2.k1.00"), 0);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "S:permit:3", 7, 15u, "v2.admin.k1.0f5ee9eb23f4e8f36684f8679d0fe0b92da56247b6223aa1eb05b7aeb8891d35"), 0);
  ck_assert_int_eq(VERIFY(&ks, "picket:", "S:permit:3", 7, 15u, "v2.lock..0f5ee9eb23f4e8f36684f8679d0fe0b92da56247b6223aa1eb05b7aeb8891d35"), 0);
}
END_TEST

START_TEST(fence_keys_refused) {
  char err[200];
  picket_proto_fence_keys ks;
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
  tcase_add_test(tc, fence_token_kinds);
  tcase_add_test(tc, fence_keys_refused);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
