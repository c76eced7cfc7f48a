/* test_fence.c: unit tests of the in-process fence register
 * (client/fence.c, picket/fence.h): the verdicts, the cap, and the rule
 * under concurrent writers (no admitted write ever carries a fence lower
 * than one admitted before it for the same resource), and the verifier of
 * signed fences (picket_fence_keys_load, picket_fence_token_verify). */
#include <check.h>

#include "harness.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "picket/fence.h"
#include "picket_proto.h"

START_TEST(test_parse) {
  ck_assert_int_eq(picket_fence_parse("1", 1), 1);
  ck_assert_int_eq(picket_fence_parse("42", 2), 42);
  ck_assert_int_eq(picket_fence_parse("9223372036854775807", 19), INT64_MAX);
  ck_assert_int_eq(picket_fence_parse("9223372036854775808", 19), 0);
  ck_assert_int_eq(picket_fence_parse("0", 1), 0);
  ck_assert_int_eq(picket_fence_parse("07", 2), 0);
  ck_assert_int_eq(picket_fence_parse("-1", 2), 0);
  ck_assert_int_eq(picket_fence_parse("+1", 2), 0);
  ck_assert_int_eq(picket_fence_parse(" 1", 2), 0);
  ck_assert_int_eq(picket_fence_parse("1 ", 2), 0);
  ck_assert_int_eq(picket_fence_parse("1x", 2), 0);
  ck_assert_int_eq(picket_fence_parse("", 0), 0);
  ck_assert_int_eq(picket_fence_parse(NULL, 0), 0);
  /* Only `len` bytes count: "12" out of "123". */
  ck_assert_int_eq(picket_fence_parse("123", 2), 12);
}
END_TEST

static int writes;
static int64_t last_written;
static int write_ok(void *arg, const char *resource, int64_t fence) {
  (void)resource;
  writes++;
  last_written = fence;
  return arg == NULL ? 0 : *(int *)arg;
}

START_TEST(test_verdicts) {
  picket_fence_register *reg = picket_fence_register_new(0);
  ck_assert_ptr_nonnull(reg);
  int64_t h = -1;
  writes = 0;

  /* Unknown resource: admissible, highest 0, and asking creates nothing. */
  ck_assert_int_eq(picket_fence_check(reg, "inv", 5, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(h, 0);
  ck_assert_uint_eq(picket_fence_count(reg), 0);

  ck_assert_int_eq(picket_fence_admit(reg, "inv", 5, write_ok, NULL, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(h, 5);
  ck_assert_int_eq(writes, 1);
  ck_assert_int_eq(last_written, 5);
  /* Equal is admitted: a holder writes many times with one fence. */
  ck_assert_int_eq(picket_fence_admit(reg, "inv", 5, write_ok, NULL, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(writes, 2);
  /* Lower is stale, says the highest, and never calls the write. */
  ck_assert_int_eq(picket_fence_admit(reg, "inv", 4, write_ok, NULL, &h), PICKET_FENCE_STALE);
  ck_assert_int_eq(h, 5);
  ck_assert_int_eq(writes, 2);
  ck_assert_int_eq(picket_fence_check(reg, "inv", 4, &h), PICKET_FENCE_STALE);
  ck_assert_int_eq(h, 5);
  ck_assert_int_eq(picket_fence_check(reg, "inv", 6, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(picket_fence_highest(reg, "inv"), 5);

  /* Claim advances without a write and shuts the old fence out. */
  ck_assert_int_eq(picket_fence_claim(reg, "inv", 9, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(h, 9);
  ck_assert_int_eq(picket_fence_claim(reg, "inv", 9, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(picket_fence_admit(reg, "inv", 8, write_ok, NULL, &h), PICKET_FENCE_STALE);
  ck_assert_int_eq(h, 9);
  ck_assert_int_eq(picket_fence_claim(reg, "inv", 8, &h), PICKET_FENCE_STALE);
  ck_assert_int_eq(writes, 2);

  /* A failed write records nothing. */
  int fail = -7;
  ck_assert_int_eq(picket_fence_admit(reg, "inv", 12, write_ok, &fail, &h),
                   PICKET_FENCE_WRITE_FAILED);
  ck_assert_int_eq(h, 9);
  ck_assert_int_eq(picket_fence_highest(reg, "inv"), 9);
  ck_assert_int_eq(picket_fence_admit(reg, "inv", 10, write_ok, NULL, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(h, 10);

  /* Resources are independent. */
  ck_assert_int_eq(picket_fence_admit(reg, "other", 1, write_ok, NULL, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(h, 1);
  ck_assert_uint_eq(picket_fence_count(reg), 2);

  /* Malformed: fence < 1, bad or missing names; nothing changes. */
  ck_assert_int_eq(picket_fence_admit(reg, "inv", 0, write_ok, NULL, &h), PICKET_FENCE_MALFORMED);
  ck_assert_int_eq(h, 0);
  ck_assert_int_eq(picket_fence_admit(reg, "inv", -3, NULL, NULL, &h), PICKET_FENCE_MALFORMED);
  ck_assert_int_eq(picket_fence_admit(reg, "a/b", 3, NULL, NULL, &h), PICKET_FENCE_MALFORMED);
  ck_assert_int_eq(picket_fence_admit(reg, "", 3, NULL, NULL, &h), PICKET_FENCE_MALFORMED);
  ck_assert_int_eq(picket_fence_admit(reg, NULL, 3, NULL, NULL, &h), PICKET_FENCE_MALFORMED);
  ck_assert_int_eq(picket_fence_check(reg, "a b", 3, &h), PICKET_FENCE_MALFORMED);
  ck_assert_int_eq(picket_fence_claim(NULL, "inv", 3, &h), PICKET_FENCE_MALFORMED);
  char longname[202];
  memset(longname, 'x', 201);
  longname[201] = '\0';
  ck_assert_int_eq(picket_fence_claim(reg, longname, 3, &h), PICKET_FENCE_MALFORMED);
  longname[200] = '\0'; /* 200 bytes: the longest valid name */
  ck_assert_int_eq(picket_fence_claim(reg, longname, 3, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(picket_fence_highest(reg, longname), 3);
  ck_assert_int_eq(writes, 5); /* the failed write was attempted */
  ck_assert_uint_eq(picket_fence_count(reg), 3);

  /* NULL `highest` pointers are allowed. */
  ck_assert_int_eq(picket_fence_check(reg, "inv", 1, NULL), PICKET_FENCE_STALE);
  ck_assert_int_eq(picket_fence_claim(reg, "inv", 11, NULL), PICKET_FENCE_ADMITTED);

  ck_assert_str_eq(picket_fence_verdict_str(PICKET_FENCE_ADMITTED), "admitted");
  ck_assert_str_eq(picket_fence_verdict_str(PICKET_FENCE_STALE), "stale");
  ck_assert_str_eq(picket_fence_verdict_str(PICKET_FENCE_MALFORMED), "malformed");
  ck_assert_str_eq(picket_fence_verdict_str(PICKET_FENCE_FULL), "full");
  ck_assert_str_eq(picket_fence_verdict_str(PICKET_FENCE_WRITE_FAILED), "write_failed");
  ck_assert_str_eq(picket_fence_verdict_str((picket_fence_verdict)99), "unknown");
  picket_fence_register_free(reg);
  picket_fence_register_free(NULL);
}
END_TEST

/* The cap: a full register refuses new resources and keeps serving the old
 * ones, and it grows its table well past the initial bucket count. */
START_TEST(test_cap) {
  picket_fence_register *reg = picket_fence_register_new(1000);
  char name[32];
  int64_t h;
  for (int i = 0; i < 1000; i++) {
    snprintf(name, sizeof name, "lock-%d", i);
    ck_assert_int_eq(picket_fence_claim(reg, name, i + 1, &h), PICKET_FENCE_ADMITTED);
  }
  ck_assert_uint_eq(picket_fence_count(reg), 1000);
  ck_assert_int_eq(picket_fence_claim(reg, "lock-new", 1, &h), PICKET_FENCE_FULL);
  ck_assert_int_eq(h, 0);
  ck_assert_int_eq(picket_fence_admit(reg, "lock-new", 1, write_ok, NULL, &h), PICKET_FENCE_FULL);
  /* Checking an unknown resource still works when full (it creates nothing). */
  ck_assert_int_eq(picket_fence_check(reg, "lock-new", 1, &h), PICKET_FENCE_ADMITTED);
  ck_assert_uint_eq(picket_fence_count(reg), 1000);
  for (int i = 0; i < 1000; i++) {
    snprintf(name, sizeof name, "lock-%d", i);
    ck_assert_int_eq(picket_fence_highest(reg, name), i + 1);
    ck_assert_int_eq(picket_fence_claim(reg, name, i, &h), i == 0 ? PICKET_FENCE_MALFORMED
                                                                   : PICKET_FENCE_STALE);
    ck_assert_int_eq(picket_fence_claim(reg, name, i + 2, &h), PICKET_FENCE_ADMITTED);
  }
  picket_fence_register_free(reg);
}
END_TEST

/* Concurrent writers. Fences come from one counter, as the lock service
 * issues them; each thread takes one, dawdles a little (a pause between
 * acquire and write), then admits a write. The write callback appends to a
 * per-resource log and checks that no other write of that resource runs at
 * the same time. Afterwards each log must be non-decreasing: no admitted
 * write ever has a fence lower than one admitted before it. */
#define CONC_THREADS 8
#define CONC_OPS 4000
#define CONC_RESOURCES 3

typedef struct {
  atomic_int inside;
  int64_t log[CONC_THREADS * CONC_OPS];
  size_t n;
  atomic_long next_fence;
} conc_resource;

static conc_resource conc[CONC_RESOURCES];
static picket_fence_register *conc_reg;
static atomic_long conc_stale, conc_admitted, conc_errors;
static const char *conc_names[CONC_RESOURCES] = {"inventory-sync", "orders", "payments"};

static int conc_write(void *arg, const char *resource, int64_t fence) {
  conc_resource *r = arg;
  if (atomic_fetch_add(&r->inside, 1) != 0) atomic_fetch_add(&conc_errors, 1);
  (void)resource;
  r->log[r->n++] = fence;
  atomic_fetch_sub(&r->inside, 1);
  return 0;
}

static void *conc_thread(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
  for (int i = 0; i < CONC_OPS; i++) {
    int ri = rand_r(&seed) % CONC_RESOURCES;
    conc_resource *r = &conc[ri];
    int64_t fence = atomic_fetch_add(&r->next_fence, 1) + 1;
    if (rand_r(&seed) % 8 == 0) {
      struct timespec ts = {0, (rand_r(&seed) % 50) * 1000};
      nanosleep(&ts, NULL);
    }
    int64_t h;
    picket_fence_verdict v;
    if (rand_r(&seed) % 4 == 0)
      v = picket_fence_claim(conc_reg, conc_names[ri], fence, &h);
    else
      v = picket_fence_admit(conc_reg, conc_names[ri], fence, conc_write, r, &h);
    if (v == PICKET_FENCE_ADMITTED) {
      atomic_fetch_add(&conc_admitted, 1);
      if (h < fence) atomic_fetch_add(&conc_errors, 1);
    } else if (v == PICKET_FENCE_STALE) {
      atomic_fetch_add(&conc_stale, 1);
      if (h <= fence) atomic_fetch_add(&conc_errors, 1); /* stale must say a higher one */
    } else {
      atomic_fetch_add(&conc_errors, 1);
    }
  }
  return NULL;
}

START_TEST(test_concurrent_writers) {
  conc_reg = picket_fence_register_new(0);
  memset(conc, 0, sizeof conc);
  pthread_t t[CONC_THREADS];
  for (uintptr_t i = 0; i < CONC_THREADS; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, conc_thread, (void *)(i + 1)), 0);
  for (int i = 0; i < CONC_THREADS; i++) pthread_join(t[i], NULL);

  long errors = atomic_load(&conc_errors);
  long decided = atomic_load(&conc_admitted) + atomic_load(&conc_stale);
  ck_assert_int_eq(errors, 0);
  ck_assert_int_eq(decided, CONC_THREADS * CONC_OPS);
  size_t logged = 0;
  for (int ri = 0; ri < CONC_RESOURCES; ri++) {
    conc_resource *r = &conc[ri];
    for (size_t i = 1; i < r->n; i++)
      ck_assert_msg(r->log[i] >= r->log[i - 1], "%s: fence %lld admitted after %lld",
                    conc_names[ri], (long long)r->log[i], (long long)r->log[i - 1]);
    /* The last admitted fence is at most the recorded highest (a later
     * claim may have raised it further). */
    if (r->n > 0) ck_assert_int_le(r->log[r->n - 1], picket_fence_highest(conc_reg, conc_names[ri]));
    logged += r->n;
  }
  ck_assert_uint_gt(logged, 0);
  picket_fence_register_free(conc_reg);
}
END_TEST

/* The incident in lockstep: the holder with fence 1 claims, then pauses;
 * the next holder (fence 2) claims and writes; the paused one comes back
 * and is refused. Deterministic, unlike the random interleavings above. */
START_TEST(test_zombie_refused) {
  picket_fence_register *reg = picket_fence_register_new(4);
  int64_t h;
  writes = 0;
  ck_assert_int_eq(picket_fence_claim(reg, "inventory-sync", 1, &h), PICKET_FENCE_ADMITTED);
  /* zombie (fence 1) pauses here; the new holder claims and writes */
  ck_assert_int_eq(picket_fence_claim(reg, "inventory-sync", 2, &h), PICKET_FENCE_ADMITTED);
  ck_assert_int_eq(picket_fence_admit(reg, "inventory-sync", 2, write_ok, NULL, &h),
                   PICKET_FENCE_ADMITTED);
  /* zombie resumes */
  ck_assert_int_eq(picket_fence_admit(reg, "inventory-sync", 1, write_ok, NULL, &h),
                   PICKET_FENCE_STALE);
  ck_assert_int_eq(h, 2);
  ck_assert_int_eq(writes, 1);
  ck_assert_int_eq(last_written, 2);
  picket_fence_register_free(reg);
}
END_TEST

/* Writes `text` to a fresh temp file; returns its path (static buffer). */
static const char *key_file(const char *text) {
  static char path[64];
  ck_assert_int_eq(harness_write_tmpfile(path, sizeof path, "fence-keys", text), 0);
  return path;
}

/* The token of proto/README.md's test vector: key 00..1f, KID k1, kind
 * lock, prefix picket:, lock inventory-sync, fence 42 (computed outside
 * picket); and the v1 token of the same, which names no kind. */
#define VECTOR "v2.lock.k1.551b2f98ebf05e8cfb8f5aef8fe2b6fdabdc5e8c249d9958074648c0839be91e"
#define VECTOR_V1 "v1.k1.112fa84b00300fd99a9de4a5c8b55e076027d493039e951dc45777d035bf0397"
#define KEY_K1 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

START_TEST(test_signed_fences) {
  char err[256];
  const char *path = key_file("# new key first, the old one still verifies\n"
                              "k2 ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff\n"
                              "k1 " KEY_K1 "\n");
  picket_fence_keys *keys = picket_fence_keys_load(path, err, sizeof err);
  unlink(path);
  ck_assert_msg(keys != NULL, "%s", err);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, VECTOR), 1);
  ck_assert_int_eq(picket_fence_token_verify(keys, NULL, "inventory-sync", 42, VECTOR), 1);
  /* another lock, fence or prefix; truncated, altered, empty or NULL: no */
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-syn", 42, VECTOR), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 43, VECTOR), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "other:", "inventory-sync", 42, VECTOR), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "", "inventory-sync", 42, VECTOR), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, VECTOR "0"), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, "v2.lock.k1.00"), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, ""), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, NULL), 0);
  ck_assert_int_eq(picket_fence_token_verify(NULL, "picket:", "inventory-sync", 42, VECTOR), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 0, VECTOR), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "pick{et", "inventory-sync", 42, VECTOR), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "in/ventory", 42, VECTOR), 0);
  char upper[] = VECTOR;
  for (char *c = upper + 11; *c; c++)
    if (*c >= 'a' && *c <= 'f') *c = (char)(*c - 'a' + 'A');
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, upper), 0);
  /* The first key's tokens verify too, and only under its own id. */
  picket_proto_fence_keys pk;
  const char k2[] = "k2 ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff\n";
  ck_assert_int_eq(picket_proto_fence_keys_parse(k2, sizeof k2 - 1, &pk, err, sizeof err), 0);
  char tok[PICKET_PROTO_FENCE_TOKEN_MAX + 1];
  ck_assert_int_eq(picket_proto_fence_token(&pk.keys[0], PICKET_PROTO_FENCE_KIND_LOCK, "picket:", "x",
                                            INT64_MAX, tok), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "x", INT64_MAX, tok), 1);
  memcpy(tok + 8, "k1", 2);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "x", INT64_MAX, tok), 0);

  /* Kinds (issue 39): a read lease's token carries its epoch's fence, the
   * writer's, and must not pass as the writer's; a plain lock named like a
   * permit must not pass as the permit's. The name's shape says the kind
   * picket_fence_token_verify takes; _kinds says it outright. */
  const char *rw = "inventory-sync:rw", *permit = "S:permit:3";
  char rtok[sizeof tok], wtok[sizeof tok], ptok[sizeof tok], ltok[sizeof tok];
  ck_assert_int_eq(picket_proto_fence_token(&pk.keys[0], PICKET_FENCE_KIND_READ, "picket:", rw, 9, rtok), 0);
  ck_assert_int_eq(picket_proto_fence_token(&pk.keys[0], PICKET_FENCE_KIND_WRITE, "picket:", rw, 9, wtok), 0);
  ck_assert_int_eq(picket_proto_fence_token(&pk.keys[0], PICKET_FENCE_KIND_PERMIT, "picket:", permit, 9, ptok), 0);
  ck_assert_int_eq(picket_proto_fence_token(&pk.keys[0], PICKET_FENCE_KIND_LOCK, "picket:", permit, 9, ltok), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, NULL, rw, 9, wtok), 1);
  ck_assert_int_eq(picket_fence_token_verify(keys, NULL, rw, 9, rtok), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, NULL, permit, 9, ptok), 1);
  ck_assert_int_eq(picket_fence_token_verify(keys, NULL, permit, 9, ltok), 0);
  ck_assert_int_eq(picket_fence_token_verify_kinds(keys, NULL, rw, 9, PICKET_FENCE_KIND_READ, rtok), 1);
  ck_assert_int_eq(picket_fence_token_verify_kinds(keys, NULL, rw, 9, PICKET_FENCE_KIND_WRITE, rtok), 0);
  ck_assert_int_eq(picket_fence_token_verify_kinds(keys, NULL, rw, 9,
                                                   PICKET_FENCE_KIND_READ | PICKET_FENCE_KIND_WRITE, wtok), 1);
  ck_assert_int_eq(picket_fence_token_verify_kinds(keys, NULL, permit, 9, PICKET_FENCE_KIND_LOCK, ltok), 1);
  ck_assert_int_eq(picket_fence_token_verify_kinds(keys, NULL, permit, 9, PICKET_FENCE_KIND_LOCK, ptok), 0);
  ck_assert_int_eq(picket_fence_token_verify_kinds(keys, NULL, permit, 9, 16, ptok), 0); /* no such kind */
  ck_assert_int_eq(picket_fence_token_verify_kinds(keys, NULL, permit, 9, 0, ptok), 1);    /* 0: by name */

  /* v1 tokens: refused by default; admitted while the upgrade switch is on */
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, VECTOR_V1), 0);
  picket_fence_keys_accept_v1(keys, 1);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, VECTOR_V1), 1);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 43, VECTOR_V1), 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, VECTOR), 1);
  picket_fence_keys_accept_v1(keys, 0);
  ck_assert_int_eq(picket_fence_token_verify(keys, "picket:", "inventory-sync", 42, VECTOR_V1), 0);
  picket_fence_keys_accept_v1(NULL, 1);
  picket_fence_keys_free(keys);
  picket_fence_keys_free(NULL);

  /* Refused files: NULL, with the path and line, never the key. */
  ck_assert_ptr_null(picket_fence_keys_load("/nonexistent/keys", err, sizeof err));
  ck_assert_ptr_nonnull(strstr(err, "/nonexistent/keys"));
  path = key_file("k1 " KEY_K1 "\nk1 " KEY_K1 "\n");
  ck_assert_ptr_null(picket_fence_keys_load(path, err, sizeof err));
  unlink(path);
  ck_assert_msg(strstr(err, "line 2") && !strstr(err, "0102030405"), "%s", err);
  path = key_file("k1 " KEY_K1 "zz\n");
  ck_assert_ptr_null(picket_fence_keys_load(path, NULL, 0));
  unlink(path);
  ck_assert_ptr_null(picket_fence_keys_load(NULL, err, sizeof err));
}
END_TEST

int main(void) {
  Suite *s = suite_create("fence");
  TCase *tc = tcase_create("register");
  tcase_add_test(tc, test_parse);
  tcase_add_test(tc, test_verdicts);
  tcase_add_test(tc, test_cap);
  tcase_add_test(tc, test_zombie_refused);
  tcase_add_test(tc, test_concurrent_writers);
  tcase_add_test(tc, test_signed_fences);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
