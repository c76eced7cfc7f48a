/* common.c: what every file of the etcd store shares, below all of them:
 * the settings, the client each thread owns, how an etcd failure becomes
 * a store status, the key of a name, TTLs in etcd's whole seconds, and a
 * grant's JSON (common.h lists them). It calls nothing of the store above
 * it, so the families (locks.c, semaphore.c, rwlock.c, admin.c) and the
 * dispatcher (store_etcd.c) stand on it without a circle.
 *
 * Each thread that calls etcd owns one client (a pthread key holds it), as
 * each thread owns its Redis connection in the Redis store: each worker
 * of a loop's pipe (pipe.c) for the calls it makes, a loop thread for its
 * direct calls, the feed's and the events' threads for theirs. */
#include "common.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const config *store_etcd_cfg;
etcd_client_opts store_etcd_opts;
static pthread_key_t client_key;

static void client_destroy(void *c) { etcd_client_free(c); }

int store_etcd_clients_init(void) { return pthread_key_create(&client_key, client_destroy); }

void store_etcd_thread_done(void) {
  etcd_client *c = pthread_getspecific(client_key);
  etcd_client_free(c);
  pthread_setspecific(client_key, NULL);
}

etcd_client *store_etcd_client(store_result *r) {
  etcd_client *c = pthread_getspecific(client_key);
  if (c) return c;
  char err[200];
  c = etcd_client_new(&store_etcd_opts, err, sizeof err);
  if (c == NULL) {
    snprintf(r->err, sizeof r->err, "etcd: %s", err);
    return NULL;
  }
  pthread_setspecific(client_key, c);
  return c;
}

store_status store_etcd_failed(etcd_client *c, int code, store_result *r) {
  snprintf(r->err, sizeof r->err, "%.250s", etcd_client_errstr(c)); /* it names etcd */
  /* credentials etcd refuses make it unreachable for picketd, as a Redis
   * that refuses AUTH does: 503, with the reason in the log */
  if (code == ETCD_EUNAVAIL || code == ETCD_EAUTH) return STORE_EUNAVAIL;
  if (code == ETCD_ENOSPACE) return STORE_EFULL;
  return STORE_EREPLY;
}

void store_etcd_key(char *out, size_t cap, char kind, const char *name) {
  snprintf(out, cap, "%s%c/%s", store_etcd_cfg->key_prefix, kind, name);
}

static _Atomic int64_t min_ttl_s; /* 0 until learned */

int64_t store_etcd_min_ttl_s(void) {
  int64_t m = min_ttl_s;
  return m > 0 ? m : 1;
}

void store_etcd_min_ttl_seen(int64_t asked_s, int64_t given_s) {
  /* etcd raises a TTL under its minimum to it, and gives any other as asked */
  if (given_s > asked_s) min_ttl_s = given_s;
  else if (asked_s == 1 && given_s == 1) min_ttl_s = 1;
}

void store_etcd_min_ttl_learn(etcd_client *c) {
  int64_t id = 0, given = 0;
  if (min_ttl_s > 0 || etcd_lease_grant(c, 1, &id, &given) != ETCD_OK) return;
  etcd_lease_revoke(c, id);
  store_etcd_min_ttl_seen(1, given);
}

int64_t store_etcd_ttl_s(int64_t ttl_ms) {
  int64_t s = ttl_ms <= 0 ? 1 : (ttl_ms + 999) / 1000, m = store_etcd_min_ttl_s();
  return s < m ? m : s;
}

int store_etcd_grant_parse(const etcd_kv *kv, store_etcd_grant *g) {
  memset(g, 0, sizeof *g);
  json_t *j = json_loadb(kv->value, kv->value_len, 0, NULL);
  if (j == NULL) return -1;
  const char *lease = json_string_value(json_object_get(j, "lease"));
  const char *owner = json_string_value(json_object_get(j, "owner"));
  const char *token = json_string_value(json_object_get(j, "qt"));
  const char *value = json_string_value(json_object_get(j, "val"));
  snprintf(g->value, sizeof g->value, "%s", value ? value : "");
  snprintf(g->lease, sizeof g->lease, "%s", lease ? lease : "");
  snprintf(g->owner, sizeof g->owner, "%s", owner ? owner : "");
  snprintf(g->token, sizeof g->token, "%s", token ? token : "");
  g->at = json_integer_value(json_object_get(j, "at"));
  g->exp = json_integer_value(json_object_get(j, "exp"));
  g->renewals = json_integer_value(json_object_get(j, "renewals"));
  g->ttl_ms = json_integer_value(json_object_get(j, "ttl_ms"));
  g->cap = json_integer_value(json_object_get(j, "cap"));
  g->cap_lease = json_integer_value(json_object_get(j, "cl"));
  g->delay_ms = json_integer_value(json_object_get(j, "delay"));
  g->delay_lease = json_integer_value(json_object_get(j, "dl"));
  g->limit = json_integer_value(json_object_get(j, "limit"));
  g->write = json_is_true(json_object_get(j, "write"));
  g->fence = json_integer_value(json_object_get(j, "fence"));
  json_decref(j);
  return lease ? 0 : -1;
}

char *store_etcd_grant_value(const store_etcd_grant *g) {
  json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "lease", g->lease, "owner", g->owner,
                        "ttl_ms", (json_int_t)g->ttl_ms, "at", (json_int_t)g->at, "renewals",
                        (json_int_t)g->renewals, "exp", (json_int_t)g->exp);
  /* the rest only when set, so a plain grant stays short */
  if (j && g->token[0]) json_object_set_new(j, "qt", json_string(g->token));
  if (j && g->cap) json_object_set_new(j, "cap", json_integer(g->cap));
  if (j && g->cap_lease) json_object_set_new(j, "cl", json_integer(g->cap_lease));
  if (j && g->delay_ms) json_object_set_new(j, "delay", json_integer(g->delay_ms));
  if (j && g->delay_lease) json_object_set_new(j, "dl", json_integer(g->delay_lease));
  if (j && g->limit) json_object_set_new(j, "limit", json_integer(g->limit));
  if (j && g->write) json_object_set_new(j, "write", json_true());
  if (j && g->fence) json_object_set_new(j, "fence", json_integer(g->fence));
  if (j && g->value[0]) json_object_set_new(j, "val", json_string(g->value));
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return s;
}

int store_etcd_read(etcd_client *c, const char *key, etcd_op_result *res, etcd_kv **kv) {
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = key};
  int rc = etcd_range(c, &op, res);
  if (rc != ETCD_OK) return rc;
  *kv = res->nkvs > 0 ? &res->kvs[0] : NULL;
  return *kv != NULL;
}
