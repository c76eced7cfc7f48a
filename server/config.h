/* config.h: picketd's configuration: one struct, filled from one
 * declarative table (config.c) by flags and PICKET_* environment. */
#ifndef PICKETD_CONFIG_H
#define PICKETD_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* Where Redis is: a unix socket or host:port, with optional credentials. */
typedef struct {
  int is_unix;
  char path[256];      /* unix socket path */
  char host[256];
  int port;
  char user[128];      /* ACL user, "" for none */
  char password[256];  /* "" for none */
  int db;
} redis_target;

/* One HOST:PORT of --sentinel or --redis-cluster. */
typedef struct {
  char host[256];
  int port;
} sentinel_addr;

#define CONFIG_SENTINELS_MAX 16
#define CONFIG_CLUSTER_SEEDS_MAX 16

typedef struct {
  char listen[300];          /* HOST:PORT as given */
  char listen_host[256];
  int listen_port;
  char redis_url[600];
  redis_target redis;
  char redis_user_flag[128];  /* --redis-user as given ("" unset); the effective user is redis.user */
  char redis_password_file[512];
  int64_t redis_timeout_ms;
  char key_prefix[72];
  int threads;                /* resolved: "auto" is the online CPUs, at most 64 */
  int64_t max_ttl_ms;
  int64_t max_wait_ms;
  int64_t max_lock_delay_ms;
  int64_t index_sweep_ms;  /* sweep.c's period (0: off) */
  int64_t max_semaphore_limit;
  int64_t max_readers;         /* read leases one read/write lock may have at once */
  int max_waiters;
  int max_watchers;            /* open event streams (events.c) */
  int max_watchers_per_client; /* ...of one token or client address */
  int64_t events_heartbeat_ms;
  int max_waiters_per_ip;     /* CONFIG_AUTO (api.c says what), 0 (none) or N; without --auth-file */
  int acquire_rate_per_ip;    /* per second; 0: none; without --auth-file only */
  int list_rate;              /* listings per second per token or address; 0: none */
  char auth_file[512];        /* "": no authentication */
  char allowed_hosts[2048];   /* "auto", "*" or NAME[,NAME...] (origin.c) */
  int loopback_trust;         /* LOOPBACK_TRUST_ON: loopback without a token may break */
  char fence_key_file[512];   /* "": fences are not signed */
  int max_connections;
  int64_t conn_timeout_s;
  int64_t request_timeout_ms; /* a request's bytes must all arrive within this of its first */
  int max_conns_per_ip;      /* CONFIG_AUTO, 0 (no cap) or a cap for every address group */
  int ipv6_prefix_len;       /* IPv6 peers are grouped by this many leading bits for that cap */
  int reserved_auth_conns;   /* CONFIG_AUTO or N: slots unauthenticated connections leave free */
  int max_conns_per_token;   /* CONFIG_AUTO, 0 (no cap) or a cap for every token (conns_token.c) */
  int64_t shutdown_timeout_ms;
  int log_level;
  int log_format;
  char port_file[512];
  int allow_eviction;
  int min_replicas;
  int64_t replica_timeout_ms;
  int redis_pipeline;        /* PIPELINE_AUTO, _ON or _OFF */
  int store_workers;         /* call.c's threads for calls no loop pipelines */
  int fence_floor;           /* FENCE_FLOOR_CLOCK or _NONE */
  int64_t fence_idle_ttl_ms; /* 0: fence counters never expire (default 1 day, 0 under floor none) */
  /* --sentinel: the data nodes are found through these (0: --redis) */
  char sentinel_list[2048];
  sentinel_addr sentinels[CONFIG_SENTINELS_MAX];
  int sentinel_count;
  char sentinel_master[128];
  char sentinel_password_file[512];
  char sentinel_password[256];
  int sentinel_lease;         /* --sentinel-lease: grant only under the sentinels' lease */
  int redis_db;              /* --redis-db, for the data nodes under --sentinel */
  /* --redis-cluster: seed nodes; the rest is learnt from CLUSTER SLOTS (0: not a cluster) */
  char cluster_list[2048];
  sentinel_addr cluster_seeds[CONFIG_CLUSTER_SEEDS_MAX];
  int cluster_seed_count;
  /* --etcd: keep locks in an etcd v3 cluster instead of Redis ("": Redis) */
  char etcd_list[2048];       /* http(s)://HOST:PORT[,...], checked by check_etcd */
  char etcd_ca_file[512];
  char etcd_cert_file[512];
  char etcd_key_file[512];
  char etcd_user[128];
  char etcd_password_file[512];
  char etcd_password[256];    /* read from --etcd-password-file */
  int64_t etcd_timeout_ms;
  /* The chosen backend's call timeout (--etcd-timeout-ms under --etcd,
   * else --redis-timeout-ms), set by config_load: what the HTTP side waits
   * for a call without naming a backend. */
  int64_t store_timeout_ms;
  int etcd_calls_in_flight;   /* --etcd-calls-in-flight: worker threads per event loop */
  /* TLS (tls.c): PEM files, "" when not given; the files are read by tls_init */
  char tls_cert[512];
  char tls_key[512];
  char tls_client_ca[512];
} config;

/* --fence-floor: clock makes each new fence at least Redis TIME in
 * microseconds, so a lost counter cannot send a lock's fences back
 * (proto/README.md, "Fences"). */
enum { FENCE_FLOOR_CLOCK = 0, FENCE_FLOOR_NONE };

/* --redis-pipeline: when lock calls go through their event loop's
 * pipelined Redis connection (store.h) instead of its direct one. */
enum { PIPELINE_AUTO = 0, PIPELINE_ON, PIPELINE_OFF };

/* --loopback-trust. */
enum { LOOPBACK_TRUST_OFF = 0, LOOPBACK_TRUST_ON };

/* --max-connections-per-ip and --reserved-auth-connections auto (conns.c
 * says what each means). */
enum { CONFIG_AUTO = -1 };

/* What config_load found on the command line. */
enum { CONFIG_RUN = 0, CONFIG_HELP, CONFIG_VERSION };

/* Fills *cfg from the defaults, then the PICKET_* environment (envp, may be
 * NULL), then argv. Returns CONFIG_RUN/HELP/VERSION, or -1 with a one-line
 * message in err (the caller prints it and exits 2). Reads the password
 * file if one is named. */
int config_load(config *cfg, int argc, char **argv, char **envp, char *err, size_t errlen);

/* Writes the --help text, generated from the table. */
void config_usage(FILE *out);

/* Parses redis://[user:pass@]host:port[/db] or unix://[user@]/path[?db=N].
 * Returns 0, or -1 with a message in err. */
int config_parse_redis_url(const char *url, redis_target *t, char *err, size_t errlen);

/* Splits HOST:PORT (IPv6 as [::1]:PORT); port 0..65535. Returns 0 or -1. */
int config_parse_hostport(const char *s, char *host, size_t hostcap, int *port);

#endif
