/* test_client_tls.c: libpicket against a real picketd serving HTTPS
 * (--tls-cert), with certificates made by openssl at test time
 * (tls_certs.sh, in a temp dir removed at the end). picket_options.ca_file
 * makes calls work (acquire, renew, release, inspect, a keeper's renewals
 * on its cloned handle); without it, with another CA's bundle, with a file
 * that does not exist, or with http:// to the TLS port, calls fail with
 * PICKET_ETRANSPORT. Against a mutual-TLS picketd (--tls-client-ca) a
 * client without a certificate gets PICKET_EAUTH, 401 unauthenticated. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "picket/picket.h"

static harness_redis *redis;
static harness_picketd *tls, *mtls;
static char pki[256], ca_a[300], ca_b[300], tls_url[64], mtls_url[64];

static harness_picketd *start_tls(const char *client_ca) {
  char cert[300], key[300];
  snprintf(cert, sizeof cert, "%s/srvA.crt", pki);
  snprintf(key, sizeof key, "%s/srvA.key", pki);
  const char *args[] = {"--tls-cert", cert, "--tls-key", key,
                        client_ca ? "--tls-client-ca" : NULL, client_ca, NULL};
  harness_picketd *p = harness_picketd_start(harness_redis_url(redis), args);
  ck_assert_ptr_nonnull(p);
  return p;
}

static void servers_start(void) {
  ck_assert_int_eq(harness_make_tmpdir(pki, sizeof pki, "tls"), 0);
  char cmd[600], ca_c[300];
  snprintf(cmd, sizeof cmd, "bash '%s/tests/integration/tls_certs.sh' '%s'",
           getenv("PICKET_SOURCE_DIR"), pki);
  ck_assert_msg(system(cmd) == 0, "openssl could not make the test certificates");
  snprintf(ca_a, sizeof ca_a, "%s/caA.crt", pki);
  snprintf(ca_b, sizeof ca_b, "%s/caB.crt", pki);
  snprintf(ca_c, sizeof ca_c, "%s/caC.crt", pki);
  redis = harness_redis_start(NULL);
  ck_assert_ptr_nonnull(redis);
  tls = start_tls(NULL);
  mtls = start_tls(ca_c);
  snprintf(tls_url, sizeof tls_url, "https://127.0.0.1:%d", harness_picketd_port(tls));
  snprintf(mtls_url, sizeof mtls_url, "https://127.0.0.1:%d", harness_picketd_port(mtls));
}

static void servers_stop(void) {
  harness_picketd_free(tls);
  harness_picketd_free(mtls);
  harness_redis_free(redis);
  harness_rm_rf(pki);
}

/* A client of url trusting ca (NULL: the system's store); no retries, so a
 * failure is seen at once. */
static picket_client *client_of(const char *url, const char *ca) {
  picket_options o;
  picket_options_init(&o);
  o.ca_file = ca;
  o.retries = 0;
  picket_client *c = NULL;
  ck_assert_int_eq(picket_client_new(url, &o, &c), 0);
  return c;
}

START_TEST(ca_file_calls) {
  char ca[sizeof ca_a];
  snprintf(ca, sizeof ca, "%s", ca_a);
  picket_client *c = client_of(tls_url, ca);
  memset(ca, 'x', sizeof ca - 1); /* picket_client_new copied it */
  picket_lease *l = NULL;
  ck_assert_int_eq(picket_acquire(c, "ctls-a", &(picket_acquire_opts){.ttl_ms = 60000}, &l), 0);
  ck_assert_int_gt(picket_lease_fence(l), 0);
  ck_assert_int_eq(picket_renew(c, l, 30000), 0);
  picket_lock_info info;
  ck_assert_int_eq(picket_inspect(c, "ctls-a", &info), 0);
  ck_assert_int_eq(info.held, 1);
  ck_assert_int_eq(picket_release(c, l), 0);
  ck_assert_int_eq(picket_inspect(c, "ctls-a", &info), 0);
  ck_assert_int_eq(info.held, 0);
  picket_lease_free(l);
  picket_client_free(c);
}
END_TEST

/* Takes `name` with a short TTL, lets a keeper renew it three times, and
 * releases it: the keeper renews on its own handle, cloned from c's. */
static void keep_and_release(picket_client *c, const char *name) {
  picket_lease *l = NULL;
  ck_assert_int_eq(picket_acquire(c, name, &(picket_acquire_opts){.ttl_ms = 600}, &l), 0);
  picket_keeper *k = NULL;
  ck_assert_int_eq(picket_keeper_start(c, l, NULL, &k), 0);
  int64_t until = harness_now_ms() + 10000 * harness_time_scale();
  while (picket_keeper_renewals(k) < 3 && picket_keeper_lost(k) == 0 && harness_now_ms() < until)
    harness_sleep_ms(20);
  ck_assert_int_eq(picket_keeper_lost(k), 0);
  ck_assert_int_ge(picket_keeper_renewals(k), 3);
  ck_assert_int_eq(picket_keeper_stop(k), 0);
  ck_assert_int_eq(picket_release(c, l), 0);
  picket_lease_free(l);
}

/* The CA file must come along to the keeper's handle. */
START_TEST(keeper_over_tls) {
  picket_client *c = client_of(tls_url, ca_a);
  keep_and_release(c, "ctls-k");
  picket_client_free(c);
}
END_TEST

/* Each of these fails the handshake (or never gets one): a transport
 * error, and nothing granted. */
START_TEST(untrusted_fails) {
  char missing[320];
  snprintf(missing, sizeof missing, "%s/missing.crt", pki);
  char plain[64];
  snprintf(plain, sizeof plain, "http://127.0.0.1:%d", harness_picketd_port(tls));
  struct {
    const char *url, *ca, *what;
  } cases[] = {{tls_url, NULL, "the system's CAs"},
               {tls_url, ca_b, "another CA"},
               {tls_url, missing, "a CA file that does not exist"},
               {plain, NULL, "plain HTTP to the TLS port"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    picket_client *c = client_of(cases[i].url, cases[i].ca);
    picket_lease *l = NULL;
    int err = picket_acquire(c, "ctls-u", NULL, &l);
    ck_assert_msg(err == PICKET_ETRANSPORT, "%s: %s (%s)", cases[i].what, picket_err_name(err),
                  picket_client_error_message(c));
    ck_assert_ptr_null(l);
    ck_assert_str_ne(picket_client_error_message(c), "");
    picket_client_free(c);
  }
  picket_client *c = client_of(tls_url, ca_a);
  picket_lock_info info;
  ck_assert_int_eq(picket_inspect(c, "ctls-u", &info), 0);
  ck_assert_int_eq(info.fence, 0);
  picket_client_free(c);
}
END_TEST

START_TEST(mtls_without_certificate_is_eauth) {
  picket_client *c = client_of(mtls_url, ca_a);
  picket_lease *l = NULL;
  ck_assert_int_eq(picket_acquire(c, "ctls-m", NULL, &l), PICKET_EAUTH);
  ck_assert_int_eq(picket_client_status(c), 401);
  ck_assert_str_eq(picket_client_error_code(c), "unauthenticated");
  picket_lock_info info;
  ck_assert_int_eq(picket_inspect(c, "ctls-m", &info), PICKET_EAUTH);
  picket_client_free(c);
}
END_TEST

/* With its certificate (cert_file, key_file) a client gets through mutual
 * TLS, its keeper too; a certificate of another CA gets PICKET_EAUTH; a
 * certificate without its key is refused at once. */
START_TEST(mtls_with_certificate) {
  picket_options o;
  picket_options_init(&o);
  char cert[300], key[300], other[300], other_key[300];
  snprintf(cert, sizeof cert, "%s/cliC.crt", pki);
  snprintf(key, sizeof key, "%s/cliC.key", pki);
  snprintf(other, sizeof other, "%s/cliB.crt", pki);
  snprintf(other_key, sizeof other_key, "%s/cliB.key", pki);
  o.ca_file = ca_a;
  o.retries = 0;
  o.cert_file = cert;
  picket_client *c = NULL;
  ck_assert_int_eq(picket_client_new(mtls_url, &o, &c), PICKET_EINVAL); /* no key */
  o.key_file = key;
  ck_assert_int_eq(picket_client_new(mtls_url, &o, &c), 0);
  memset(cert, 'x', sizeof cert - 1); /* copied */
  keep_and_release(c, "ctls-mc");
  picket_client_free(c);
  picket_lease *l = NULL;
  o.cert_file = other;
  o.key_file = other_key;
  ck_assert_int_eq(picket_client_new(mtls_url, &o, &c), 0);
  ck_assert_int_eq(picket_acquire(c, "ctls-mc", NULL, &l), PICKET_EAUTH);
  ck_assert_str_eq(picket_client_error_code(c), "unauthenticated");
  picket_client_free(c);
}
END_TEST

int main(void) {
  Suite *s = suite_create("client_tls");
  TCase *t = tcase_create("tls");
  tcase_add_unchecked_fixture(t, servers_start, servers_stop);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, ca_file_calls);
  tcase_add_test(t, keeper_over_tls);
  tcase_add_test(t, untrusted_fails);
  tcase_add_test(t, mtls_without_certificate_is_eauth);
  tcase_add_test(t, mtls_with_certificate);
  suite_add_tcase(s, t);
  return harness_run_suite(s);
}
