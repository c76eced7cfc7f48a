/* Unit tests of picketd's configuration: the table's defaults, flags,
 * environment, precedence, bounds, and the Redis URL and HOST:PORT forms. */
#include <check.h>

#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static config cfg;
static char err[600];

static int load(char **argv, char **envp) {
  int argc = 0;
  while (argv[argc]) argc++;
  static char *no_env[] = {NULL};
  return config_load(&cfg, argc, argv, envp ? envp : no_env, err, sizeof err);
}

START_TEST(defaults) {
  char *argv[] = {"picketd", NULL};
  ck_assert_int_eq(load(argv, NULL), CONFIG_RUN);
  ck_assert_str_eq(cfg.listen_host, "127.0.0.1");
  ck_assert_int_eq(cfg.listen_port, 7070);
  ck_assert_str_eq(cfg.redis.host, "127.0.0.1");
  ck_assert_int_eq(cfg.redis.port, 6379);
  ck_assert_str_eq(cfg.key_prefix, "picket:");
  ck_assert_int_eq(cfg.max_ttl_ms, 3600000);
  ck_assert_int_eq(cfg.max_wait_ms, 60000);
  ck_assert_int_eq(cfg.max_waiters, 10000);
  ck_assert_int_eq(cfg.min_replicas, 0);
  ck_assert_int_eq(cfg.allow_eviction, 0);
  ck_assert_int_eq(cfg.fence_floor, FENCE_FLOOR_CLOCK);
  ck_assert_int_eq(cfg.fence_idle_ttl_ms, 86400000); /* bounded by default (issue 39) */
}
END_TEST

START_TEST(fence_flags) {
  char *a[] = {"picketd", "--fence-floor", "none", NULL};
  ck_assert_int_eq(load(a, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.fence_floor, FENCE_FLOOR_NONE);
  ck_assert_int_eq(cfg.fence_idle_ttl_ms, 0); /* no floor: the default keeps counters */
  char *z[] = {"picketd", "--fence-idle-ttl-ms", "0", NULL};
  ck_assert_int_eq(load(z, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.fence_idle_ttl_ms, 0);
  char *b[] = {"picketd", "--fence-idle-ttl-ms", "86400000", NULL}; /* clock is the default */
  ck_assert_int_eq(load(b, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.fence_idle_ttl_ms, 86400000);
  char *env[] = {"PICKET_FENCE_FLOOR=none", NULL};
  char *c[] = {"picketd", NULL};
  ck_assert_int_eq(load(c, env), CONFIG_RUN);
  ck_assert_int_eq(cfg.fence_floor, FENCE_FLOOR_NONE);
  /* an idle TTL without the clock floor would send fences back to 1 */
  char *d[] = {"picketd", "--fence-floor", "none", "--fence-idle-ttl-ms", "1000", NULL};
  ck_assert_int_eq(load(d, NULL), -1);
  ck_assert_msg(strstr(err, "needs --fence-floor clock"), "%s", err);
  char *e[] = {"picketd", "--fence-idle-ttl-ms", "1000", NULL};
  ck_assert_int_eq(load(e, env), -1);
  char *f[] = {"picketd", "--fence-floor", "wall", NULL};
  ck_assert_int_eq(load(f, NULL), -1);
  char *g[] = {"picketd", "--fence-idle-ttl-ms", "-1", NULL};
  ck_assert_int_eq(load(g, NULL), -1);
}
END_TEST

START_TEST(flags_env_and_precedence) {
  char *env[] = {"PICKET_MAX_TTL_MS=5000", "PICKET_THREADS=3", "PICKET_SERVER=ignored",
                 "PICKET_LOG_FORMAT=json", NULL};
  char *argv[] = {"picketd", "--threads", "7", "--listen=0.0.0.0:0", "--allow-eviction",
                  "--key-prefix", "app:locks:", NULL};
  ck_assert_int_eq(load(argv, env), CONFIG_RUN);
  ck_assert_int_eq(cfg.max_ttl_ms, 5000);   /* from env */
  ck_assert_int_eq(cfg.threads, 7);         /* flag beats env */
  ck_assert_int_eq(cfg.log_format, 1);
  ck_assert_int_eq(cfg.listen_port, 0);
  ck_assert_str_eq(cfg.listen_host, "0.0.0.0");
  ck_assert_int_eq(cfg.allow_eviction, 1);
  ck_assert_str_eq(cfg.key_prefix, "app:locks:");
}
END_TEST

START_TEST(bad_values_are_one_line_errors) {
  char *cases[][4] = {
      {"picketd", "--threads", "0", NULL},       {"picketd", "--threads", "x", NULL},
      {"picketd", "--threads", "", NULL},        {"picketd", "--threads", " 4", NULL},
      {"picketd", "--max-ttl-ms", "-1", NULL},   {"picketd", "--nope", NULL, NULL},
      {"picketd", "--listen", "7070", NULL},     {"picketd", "--listen", "h:99999", NULL},
      {"picketd", "--redis", "http://x", NULL},  {"picketd", "--redis", "unix://rel", NULL},
      {"picketd", "--log-level", "loud", NULL},  {"picketd", "--key-prefix", "a{b}", NULL},
      {"picketd", "--threads", NULL, NULL},      {"picketd", "stray", NULL, NULL},
      {"picketd", "--allow-eviction=maybe", NULL, NULL},
      {"picketd", "--redis-password-file", "/nonexistent/file", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    err[0] = '\0';
    ck_assert_msg(load(cases[i], NULL) == -1, "case %zu accepted", i);
    ck_assert_msg(err[0] && strchr(err, '\n') == NULL, "case %zu: '%s'", i, err);
  }
  char *env[] = {"PICKET_THREADS=many", NULL};
  char *argv[] = {"picketd", NULL};
  ck_assert_int_eq(load(argv, env), -1);
  ck_assert_msg(strstr(err, "PICKET_THREADS"), "%s", err);
}
END_TEST

START_TEST(help_and_version) {
  char *h[] = {"picketd", "--help", NULL}, *v[] = {"picketd", "--version", NULL};
  ck_assert_int_eq(load(h, NULL), CONFIG_HELP);
  ck_assert_int_eq(load(v, NULL), CONFIG_VERSION);
  char buf[32768] = ""; /* the whole text: it grows with the flags */
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  config_usage(f);
  fclose(f);
  const char *flags[] = {"--listen", "--redis ", "--redis-password-file", "--key-prefix", "--threads",
                         "--max-ttl-ms", "--max-wait-ms", "--log-level", "--log-format",
                         "--port-file", "PICKET_MAX_WAIT_MS", "--min-replicas", "--sentinel ",
                         "--sentinel-master", "--sentinel-password-file", "--redis-db",
                         "--request-timeout-ms", "--max-connections-per-ip", "default: auto",
                         "--redis-cluster"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    ck_assert_msg(strstr(buf, flags[i]), "--help lacks %s", flags[i]);
}
END_TEST

START_TEST(redis_urls) {
  redis_target t;
  ck_assert_int_eq(config_parse_redis_url("redis://u:p@ss@db.local:6380/3", &t, err, sizeof err), 0);
  ck_assert_str_eq(t.user, "u");
  ck_assert_str_eq(t.password, "p@ss");
  ck_assert_str_eq(t.host, "db.local");
  ck_assert_int_eq(t.port, 6380);
  ck_assert_int_eq(t.db, 3);
  ck_assert_int_eq(config_parse_redis_url("redis://:secret@10.0.0.1:6379", &t, err, sizeof err), 0);
  ck_assert_str_eq(t.user, "");
  ck_assert_str_eq(t.password, "secret");
  ck_assert_int_eq(config_parse_redis_url("redis://cache", &t, err, sizeof err), 0);
  ck_assert_int_eq(t.port, 6379);
  ck_assert_int_eq(config_parse_redis_url("redis://[::1]:7000", &t, err, sizeof err), 0);
  ck_assert_str_eq(t.host, "::1");
  ck_assert_int_eq(t.port, 7000);
  ck_assert_int_eq(config_parse_redis_url("unix:///run/redis.sock?db=2", &t, err, sizeof err), 0);
  ck_assert(t.is_unix);
  ck_assert_str_eq(t.path, "/run/redis.sock");
  ck_assert_int_eq(t.db, 2);
  const char *bad[] = {"redis://h:0", "redis://h:x", "redis://h:1/x", "redis://", "tcp://h:1",
                       "unix://", "unix:///s?db=x", "redis://h:70000"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_msg(config_parse_redis_url(bad[i], &t, err, sizeof err) == -1, "%s accepted", bad[i]);
}
END_TEST

START_TEST(password_file_wins) {
  char path[64];
  ck_assert_int_eq(harness_write_tmpfile(path, sizeof path, "pw", "from-file\nsecond line\n"), 0);
  char *argv[] = {"picketd", "--redis", "redis://:from-url@h:1", "--redis-password-file", path, NULL};
  ck_assert_int_eq(load(argv, NULL), CONFIG_RUN);
  ck_assert_str_eq(cfg.redis.password, "from-file");
  unlink(path);
}
END_TEST

/* Command lines config_load must refuse, each with a one-line message
 * that says `want`. */
typedef struct {
  char *argv[8];
  char **env;
  const char *want;
} refused_case;

static void refused_all(refused_case *bad, size_t n) {
  for (size_t i = 0; i < n; i++) {
    ck_assert_msg(load(bad[i].argv, bad[i].env) == -1, "case %zu accepted", i);
    ck_assert_msg(strstr(err, bad[i].want), "case %zu: '%s' lacks '%s'", i, err, bad[i].want);
    ck_assert_msg(strchr(err, '\n') == NULL, "case %zu: not one line", i);
  }
}

START_TEST(sentinel_mode) {
  char *a[] = {"picketd", "--sentinel", "10.0.0.1:26379,[::1]:26380,s3:26381", "--sentinel-master",
               "picket", "--redis-db", "2", NULL};
  ck_assert_int_eq(load(a, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.sentinel_count, 3);
  ck_assert_str_eq(cfg.sentinels[0].host, "10.0.0.1");
  ck_assert_int_eq(cfg.sentinels[0].port, 26379);
  ck_assert_str_eq(cfg.sentinels[1].host, "::1");
  ck_assert_str_eq(cfg.sentinels[2].host, "s3");
  ck_assert_int_eq(cfg.redis.db, 2);
  ck_assert_str_eq(cfg.redis.host, ""); /* the sentinels name it */
  ck_assert_int_eq(cfg.min_replicas, 1); /* safe by default under Sentinel */
  char *b[] = {"picketd", "--sentinel", "h:1", "--sentinel-master", "m", "--min-replicas", "0", NULL};
  ck_assert_int_eq(load(b, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.min_replicas, 0); /* explicit: allowed */
  char *env[] = {"PICKET_SENTINEL=h:1", "PICKET_SENTINEL_MASTER=m", NULL};
  char *c[] = {"picketd", NULL};
  ck_assert_int_eq(load(c, env), CONFIG_RUN);
  ck_assert_int_eq(cfg.sentinel_count, 1);
  ck_assert_int_eq(cfg.min_replicas, 1);
  char *d[] = {"picketd", NULL};
  ck_assert_int_eq(load(d, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.sentinel_count, 0);
  ck_assert_int_eq(cfg.min_replicas, 0); /* --redis keeps its default */

  refused_case bad[] = {
      {{"picketd", "--redis", "redis://h:1", "--sentinel", "h:2", "--sentinel-master", "m"}, NULL,
       "exclusive"},
      {{"picketd", "--sentinel", "h:2", "--sentinel-master", "m"}, (char *[]){"PICKET_REDIS=redis://h:1", NULL},
       "exclusive"},
      {{"picketd", "--sentinel", "h:2"}, NULL, "needs --sentinel-master"},
      {{"picketd", "--sentinel-master", "m"}, NULL, "need --sentinel"},
      {{"picketd", "--sentinel", "h", "--sentinel-master", "m"}, NULL, "HOST:PORT"},
      {{"picketd", "--sentinel", "h:0", "--sentinel-master", "m"}, NULL, "HOST:PORT"},
      {{"picketd", "--sentinel", ",", "--sentinel-master", "m"}, NULL, "HOST:PORT"},
      {{"picketd", "--sentinel", "h:1", "--sentinel-master", "a b"}, NULL, "--sentinel-master"},
      {{"picketd", "--redis-db", "3"}, NULL, "--redis-db is for --sentinel"},
      {{"picketd", "--sentinel", "h:1", "--sentinel-master", "m", "--sentinel-password-file",
        "/nonexistent"}, NULL, "--sentinel-password-file: cannot open"},
  };
  refused_all(bad, sizeof bad / sizeof bad[0]);
  char many[400] = "";
  for (int i = 0; i < 17; i++) strcat(many, i ? ",h:1" : "h:1");
  char *e[] = {"picketd", "--sentinel", many, "--sentinel-master", "m", NULL};
  ck_assert_int_eq(load(e, NULL), -1);
  ck_assert_msg(strstr(err, "at most 16"), "%s", err);
}
END_TEST

START_TEST(cluster_mode) {
  char *a[] = {"picketd", "--redis-cluster", "10.0.0.1:7000,[::1]:7001", NULL};
  ck_assert_int_eq(load(a, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.cluster_seed_count, 2);
  ck_assert_str_eq(cfg.cluster_seeds[0].host, "10.0.0.1");
  ck_assert_int_eq(cfg.cluster_seeds[0].port, 7000);
  ck_assert_str_eq(cfg.cluster_seeds[1].host, "::1");
  ck_assert_int_eq(cfg.sentinel_count, 0);
  ck_assert_str_eq(cfg.redis.host, ""); /* the slot map names the nodes */
  ck_assert_int_eq(cfg.min_replicas, 1); /* a shard's failover promotes a replica */
  char *b[] = {"picketd", "--redis-cluster", "h:1", "--min-replicas", "0", NULL};
  ck_assert_int_eq(load(b, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.min_replicas, 0);
  char *env[] = {"PICKET_REDIS_CLUSTER=h:1,h:2,h:3", NULL};
  char *c[] = {"picketd", NULL};
  ck_assert_int_eq(load(c, env), CONFIG_RUN);
  ck_assert_int_eq(cfg.cluster_seed_count, 3);
  refused_case bad[] = {
      {{"picketd", "--redis", "redis://h:1", "--redis-cluster", "h:2"}, NULL, "exclusive"},
      {{"picketd", "--redis-cluster", "h:2"}, (char *[]){"PICKET_REDIS=redis://h:1", NULL},
       "exclusive"},
      {{"picketd", "--redis-cluster", "h:2", "--sentinel", "h:3", "--sentinel-master", "m"}, NULL,
       "exclusive"},
      {{"picketd", "--redis-cluster", "h:2", "--sentinel-master", "m"}, NULL, "need --sentinel"},
      {{"picketd", "--redis-cluster", "h:2", "--redis-db", "1"}, NULL, "only database 0"},
      {{"picketd", "--redis-cluster", "h"}, NULL, "--redis-cluster: expected HOST:PORT"},
      {{"picketd", "--redis-cluster", "h:0"}, NULL, "HOST:PORT"},
      {{"picketd", "--redis-cluster", ","}, NULL, "HOST:PORT"},
      {{"picketd", "--redis-cluster", "h:1", "--redis-password-file", "/nonexistent"}, NULL,
       "--redis-password-file: cannot open"},
      {{"picketd", "--redis-cluster", "h:1", "--redis-user", "u"}, NULL, "needs its password"},
  };
  refused_all(bad, sizeof bad / sizeof bad[0]);
  char many[400] = "";
  for (int i = 0; i < 17; i++) strcat(many, i ? ",h:1" : "h:1");
  char *e[] = {"picketd", "--redis-cluster", many, NULL};
  ck_assert_int_eq(load(e, NULL), -1);
  ck_assert_msg(strstr(err, "at most 16"), "%s", err);
}
END_TEST

/* A refused --redis never echoes its password (issue 17: a rediss:// URL
 * was refused with the whole URL on stderr). */
START_TEST(connection_limits) {
  char *d[] = {"picketd", NULL};
  ck_assert_int_eq(load(d, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.request_timeout_ms, 10000);
  ck_assert_int_eq(cfg.max_conns_per_ip, CONFIG_AUTO);
  struct {
    const char *flag, *value;
    int ok;
    long long want;
  } cases[] = {
      {"--request-timeout-ms", "100", 1, 100},      {"--request-timeout-ms", "600000", 1, 600000},
      {"--request-timeout-ms", "99", 0, 0},         {"--request-timeout-ms", "600001", 0, 0},
      {"--request-timeout-ms", "auto", 0, 0},       {"--max-connections-per-ip", "auto", 1, CONFIG_AUTO},
      {"--max-connections-per-ip", "0", 1, 0},      {"--max-connections-per-ip", "64", 1, 64},
      {"--max-connections-per-ip", "1000000", 1, 1000000},
      {"--max-connections-per-ip", "-1", 0, 0},     {"--max-connections-per-ip", "1000001", 0, 0},
      {"--max-connections-per-ip", "Auto", 0, 0},   {"--max-connections-per-ip", "", 0, 0},
      {"--max-connections-per-ip", "8x", 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *a[] = {"picketd", (char *)cases[i].flag, (char *)cases[i].value, NULL};
    err[0] = '\0';
    int rc = load(a, NULL);
    if (!cases[i].ok) {
      ck_assert_msg(rc == -1, "%s %s accepted", cases[i].flag, cases[i].value);
      ck_assert_msg(strstr(err, cases[i].flag + 2) && strchr(err, '\n') == NULL, "%s", err);
      continue;
    }
    ck_assert_msg(rc == CONFIG_RUN, "%s %s: %s", cases[i].flag, cases[i].value, err);
    long long got = cases[i].flag[2] == 'r' ? cfg.request_timeout_ms : cfg.max_conns_per_ip;
    ck_assert_msg(got == cases[i].want, "%s %s gave %lld", cases[i].flag, cases[i].value, got);
  }
  char *env[] = {"PICKET_MAX_CONNECTIONS_PER_IP=16", "PICKET_REQUEST_TIMEOUT_MS=2500", NULL};
  ck_assert_int_eq(load(d, env), CONFIG_RUN);
  ck_assert_int_eq(cfg.max_conns_per_ip, 16);
  ck_assert_int_eq(cfg.request_timeout_ms, 2500);
  char *e[] = {"picketd", "--max-connections-per-ip=auto", NULL}; /* the flag beats env */
  ck_assert_int_eq(load(e, env), CONFIG_RUN);
  ck_assert_int_eq(cfg.max_conns_per_ip, CONFIG_AUTO);
  char *bad_env[] = {"PICKET_MAX_CONNECTIONS_PER_IP=lots", NULL};
  ck_assert_int_eq(load(d, bad_env), -1);
  ck_assert_msg(strstr(err, "PICKET_MAX_CONNECTIONS_PER_IP") && strstr(err, "auto"), "%s", err);
  /* Issue 28: the IPv6 group prefix and the slots kept for tokens. */
  ck_assert_int_eq(load(d, NULL), CONFIG_RUN);
  ck_assert_int_eq(cfg.ipv6_prefix_len, 64);
  ck_assert_int_eq(cfg.reserved_auth_conns, CONFIG_AUTO);
  char *v6[] = {"PICKET_IPV6_PREFIX_LEN=48", NULL};
  ck_assert_int_eq(load(d, v6), CONFIG_RUN);
  ck_assert_int_eq(cfg.ipv6_prefix_len, 48);
  const char *refused[][4] = {
      {"--ipv6-prefix-len", "0"}, {"--ipv6-prefix-len", "129"},
      {"--reserved-auth-connections", "8"}, /* no --auth-file */
      {"--reserved-auth-connections", "-1"},
      {"--reserved-auth-connections", "16", "--auth-file", "/nonexistent"}, /* not below 16 */
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    char *a[] = {"picketd", "--max-connections", "16", (char *)refused[i][0],
                 (char *)refused[i][1], (char *)refused[i][2], (char *)refused[i][3], NULL};
    err[0] = '\0';
    ck_assert_msg(load(a, NULL) == -1, "%s %s accepted", refused[i][0], refused[i][1]);
    ck_assert_msg(strstr(err, refused[i][0] + 2) && strchr(err, '\n') == NULL, "%s", err);
  }
  char *ok[] = {"picketd", "--max-connections", "16", "--reserved-auth-connections", "15",
                "--auth-file", "/nonexistent", NULL}; /* config_load does not read it */
  ck_assert_msg(load(ok, NULL) == CONFIG_RUN, "%s", err);
  ck_assert_int_eq(cfg.reserved_auth_conns, 15);
}
END_TEST

/* TLS files go in pairs; their contents are read by tls_init, not here. */
START_TEST(tls_flags) {
  char *a[] = {"picketd", "--tls-cert", "/c.pem", "--tls-key", "/k.pem", "--tls-client-ca",
               "/ca.pem", NULL};
  ck_assert_int_eq(load(a, NULL), CONFIG_RUN);
  ck_assert_str_eq(cfg.tls_cert, "/c.pem");
  ck_assert_str_eq(cfg.tls_key, "/k.pem");
  ck_assert_str_eq(cfg.tls_client_ca, "/ca.pem");
  char *env[] = {"PICKET_TLS_CERT=/e.pem", "PICKET_TLS_KEY=/ek.pem", NULL};
  char *b[] = {"picketd", NULL};
  ck_assert_int_eq(load(b, env), CONFIG_RUN);
  ck_assert_str_eq(cfg.tls_cert, "/e.pem");
  ck_assert_str_eq(cfg.tls_key, "/ek.pem");
  char *c[] = {"picketd", "--tls-cert", "/c.pem", NULL};
  ck_assert_int_eq(load(c, NULL), -1);
  ck_assert_msg(strstr(err, "--tls-cert and --tls-key go together"), "%s", err);
  char *d[] = {"picketd", "--tls-key", "/k.pem", NULL};
  ck_assert_int_eq(load(d, NULL), -1);
  char *e[] = {"picketd", "--tls-client-ca", "/ca.pem", NULL};
  ck_assert_int_eq(load(e, NULL), -1);
  ck_assert_msg(strstr(err, "--tls-client-ca needs --tls-cert"), "%s", err);
  ck_assert_int_eq(load(b, NULL), CONFIG_RUN); /* neither: plain HTTP */
  ck_assert_str_eq(cfg.tls_cert, "");
}
END_TEST

/* An ACL user over a unix socket (unix://USER@/path) or from --redis-user
 * (any mode, Sentinel's data nodes too); the password only from
 * --redis-password-file, and never echoed. */
START_TEST(redis_user) {
  char path[64];
  ck_assert_int_eq(harness_write_tmpfile(path, sizeof path, "pw", "pw-of-picketd\n"), 0);
  char *a[] = {"picketd", "--redis", "unix://picketd@/run/redis.sock?db=2", "--redis-password-file",
               path, NULL};
  ck_assert_int_eq(load(a, NULL), CONFIG_RUN);
  ck_assert(cfg.redis.is_unix);
  ck_assert_str_eq(cfg.redis.user, "picketd");
  ck_assert_str_eq(cfg.redis.path, "/run/redis.sock");
  ck_assert_int_eq(cfg.redis.db, 2);
  ck_assert_str_eq(cfg.redis.password, "pw-of-picketd");
  /* --redis-user wins over the URL's, and works with --sentinel */
  char *b[] = {"picketd", "--redis", "redis://u:p@h:1", "--redis-user", "other", NULL};
  ck_assert_int_eq(load(b, NULL), CONFIG_RUN);
  ck_assert_str_eq(cfg.redis.user, "other");
  ck_assert_str_eq(cfg.redis.password, "p");
  char *env[] = {"PICKET_REDIS_USER=picketd", NULL};
  char *c[] = {"picketd", "--sentinel", "s:26379", "--sentinel-master", "m", "--redis-password-file",
               path, NULL};
  ck_assert_int_eq(load(c, env), CONFIG_RUN);
  ck_assert_str_eq(cfg.redis.user, "picketd");
  ck_assert_str_eq(cfg.redis.password, "pw-of-picketd");
  unlink(path);
  /* a user without a password would AUTH as nobody: refused */
  char *d[] = {"picketd", "--redis", "unix://picketd@/run/redis.sock", NULL};
  ck_assert_int_eq(load(d, NULL), -1);
  ck_assert_msg(strstr(err, "--redis-password-file"), "%s", err);
  char *e[] = {"picketd", "--redis-user", "picketd", NULL};
  ck_assert_int_eq(load(e, NULL), -1);
  ck_assert_msg(strstr(err, "--redis-password-file"), "%s", err);
  /* a password in a unix URL is refused without being echoed */
  char *f[] = {"picketd", "--redis", "unix://picketd:hunter2@/run/redis.sock", NULL};
  ck_assert_int_eq(load(f, NULL), -1);
  ck_assert_msg(strstr(err, "hunter2") == NULL && strstr(err, "--redis-password-file"), "%s", err);
  const char *bad[] = {"unix://@/s", "unix://u@", "unix://u@s"};
  redis_target t;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_msg(config_parse_redis_url(bad[i], &t, err, sizeof err) == -1, "%s accepted", bad[i]);
  char *g[] = {"picketd", "--redis-user", "a b", NULL};
  ck_assert_int_eq(load(g, NULL), -1);
}
END_TEST

START_TEST(redis_url_errors_keep_secrets) {
  const char *urls[] = {"rediss://user:hunter2@cache:6380", "tcp://:hunter2@cache:6379",
                        "hunter2@cache:6379", "REDIS://:hunter2@h:1"};
  for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
    char *argv[] = {"picketd", "--redis", (char *)urls[i], NULL};
    ck_assert_int_eq(load(argv, NULL), -1);
    ck_assert_msg(strstr(err, "hunter2") == NULL, "%s: %s", urls[i], err);
    ck_assert_msg(strstr(err, "--redis"), "%s: %s", urls[i], err);
  }
  char *argv[] = {"picketd", "--redis", "rediss://:hunter2@h:1", NULL};
  ck_assert_int_eq(load(argv, NULL), -1);
  ck_assert_msg(strstr(err, "TLS") && strstr(err, "stunnel"), "%s", err);
  char *env[] = {"PICKET_REDIS=rediss://:hunter2@h:1", NULL};
  char *none[] = {"picketd", NULL};
  ck_assert_int_eq(load(none, env), -1);
  ck_assert_msg(strstr(err, "hunter2") == NULL, "%s", err);
}
END_TEST

int main(void) {
  Suite *s = suite_create("config");
  TCase *tc = tcase_create("config");
  tcase_add_test(tc, defaults);
  tcase_add_test(tc, flags_env_and_precedence);
  tcase_add_test(tc, bad_values_are_one_line_errors);
  tcase_add_test(tc, help_and_version);
  tcase_add_test(tc, redis_urls);
  tcase_add_test(tc, password_file_wins);
  tcase_add_test(tc, fence_flags);
  tcase_add_test(tc, sentinel_mode);
  tcase_add_test(tc, cluster_mode);
  tcase_add_test(tc, redis_url_errors_keep_secrets);
  tcase_add_test(tc, redis_user);
  tcase_add_test(tc, connection_limits);
  tcase_add_test(tc, tls_flags);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
