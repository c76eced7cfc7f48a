/* etcd_grpc.c: etcd's KV/Txn over gRPC directly (etcd_grpc.h).
 *
 * Why: etcd's JSON gateway, which etcd_client.c speaks, is a gRPC client
 * of its own member: each request is decoded from JSON, encoded as
 * protobuf, sent over a loopback gRPC connection, and the answer goes the
 * same way back. Measured beside a hand-written etcd lock on gRPC
 * (bench/run), that cost etcd about three times the CPU per call, the
 * largest part of what separated picketd from it. So the calls that every
 * cycle makes (a grant's txn, a release's) go to etcd's gRPC port, which is
 * its client port: gRPC core's C API (Debian's libgrpc) and protobuf-c
 * (libprotobuf-c) with the messages of proto/etcd/kv.proto, nothing
 * hand-written below HTTP/2. Everything else (leases, watches, status,
 * auth) stays on the gateway: it is seldom, and it works.
 *
 * One channel per client and member; gRPC core shares one HTTP/2
 * connection among the channels to one member. A call is made on the
 * calling thread and waited for (a completion queue of the channel's
 * own, plucked), as etcd_client's calls are. */
#include "etcd_grpc.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.pb-c.h"

struct etcd_grpc {
  grpc_channel *ch;
  grpc_completion_queue *cq;
};

static pthread_once_t grpc_once = PTHREAD_ONCE_INIT;
static atomic_long answered, failed;

void etcd_grpc_counts(long *a, long *f) {
  *a = atomic_load(&answered);
  *f = atomic_load(&failed);
}
static void grpc_start(void) { grpc_init(); }

/* The whole of a PEM file, or NULL. */
static char *slurp(const char *path) {
  FILE *f = path ? fopen(path, "rb") : NULL;
  if (f == NULL) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
      if (nb == NULL) break;
      buf = nb;
    }
    size_t n = fread(buf + len, 1, 4096, f);
    len += n;
    if (n == 0) break;
  }
  fclose(f);
  if (buf) buf[len] = '\0';
  return buf;
}

etcd_grpc *etcd_grpc_new(const char *url, const char *ca_file, const char *cert_file,
                         const char *key_file, char *err, size_t errlen) {
  pthread_once(&grpc_once, grpc_start);
  int tls = strncmp(url, "https://", 8) == 0;
  if (!tls && strncmp(url, "http://", 7) != 0) {
    snprintf(err, errlen, "etcd gRPC: %.200s is not http:// or https://", url);
    return NULL;
  }
  char target[300];
  snprintf(target, sizeof target, "%s", url + (tls ? 8 : 7));
  char *slash = strchr(target, '/');
  if (slash) *slash = '\0';
  grpc_channel_credentials *creds = NULL;
  if (tls) {
    char *ca = slurp(ca_file), *cert = slurp(cert_file), *key = slurp(key_file);
    grpc_ssl_pem_key_cert_pair pair = {key, cert};
    creds = grpc_ssl_credentials_create(ca, cert && key ? &pair : NULL, NULL, NULL);
    free(ca);
    free(cert);
    free(key);
  } else {
    creds = grpc_insecure_credentials_create();
  }
  etcd_grpc *g = calloc(1, sizeof *g);
  if (creds == NULL || g == NULL) {
    if (creds) grpc_channel_credentials_release(creds);
    free(g);
    snprintf(err, errlen, "etcd gRPC: no channel to %.200s", url);
    return NULL;
  }
  g->ch = grpc_channel_create(target, creds, NULL);
  grpc_channel_credentials_release(creds);
  g->cq = grpc_completion_queue_create_for_pluck(NULL);
  return g;
}

void etcd_grpc_free(etcd_grpc *g) {
  if (g == NULL) return;
  grpc_channel_destroy(g->ch);
  grpc_completion_queue_shutdown(g->cq);
  while (grpc_completion_queue_pluck(g->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(g->cq);
  free(g);
}

/* ---- encoding: what one request allocates, freed at once after ---- */

typedef struct {
  void **p;
  int n, cap;
  int failed;
} arena;

static void *take(arena *a, size_t size) {
  if (a->failed) return NULL;
  if (a->n == a->cap) {
    void **np = realloc(a->p, (size_t)(a->cap = a->cap ? a->cap * 2 : 64) * sizeof *np);
    if (np == NULL) {
      a->failed = 1;
      return NULL;
    }
    a->p = np;
  }
  void *m = calloc(1, size);
  if (m == NULL) a->failed = 1;
  else a->p[a->n++] = m;
  return m;
}

static void arena_free(arena *a) {
  for (int i = 0; i < a->n; i++) free(a->p[i]);
  free(a->p);
}

static ProtobufCBinaryData bytes(const char *s) {
  return (ProtobufCBinaryData){s ? strlen(s) : 0, (uint8_t *)(s ? s : "")};
}

/* The range end of a prefix (etcd's: the prefix with its last byte that is
 * not 0xff plus one; "\0" for all keys), or of [key, end). */
static ProtobufCBinaryData range_end(arena *a, const char *key, int prefix, const char *end) {
  if (end) return bytes(end);
  if (!prefix) return (ProtobufCBinaryData){0, NULL};
  size_t m = strlen(key);
  while (m > 0 && (unsigned char)key[m - 1] == 0xff) m--;
  uint8_t *e = take(a, m > 0 ? m : 1);
  if (e == NULL) return (ProtobufCBinaryData){0, NULL};
  if (m == 0) return (ProtobufCBinaryData){1, e}; /* "\0" */
  memcpy(e, key, m);
  e[m - 1]++;
  return (ProtobufCBinaryData){m, e};
}

static Etcdserverpb__RequestOp *op_pb(arena *a, const etcd_op *op) {
  Etcdserverpb__RequestOp *r = take(a, sizeof *r);
  if (r == NULL || op->key == NULL) return NULL;
  etcdserverpb__request_op__init(r);
  if (op->kind == ETCD_OP_PUT) {
    Etcdserverpb__PutRequest *p = take(a, sizeof *p);
    if (p == NULL) return NULL;
    etcdserverpb__put_request__init(p);
    p->key = bytes(op->key);
    p->value = bytes(op->value);
    p->lease = op->lease;
    r->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    r->request_put = p;
  } else if (op->kind == ETCD_OP_DELETE) {
    Etcdserverpb__DeleteRangeRequest *d = take(a, sizeof *d);
    if (d == NULL) return NULL;
    etcdserverpb__delete_range_request__init(d);
    d->key = bytes(op->key);
    d->range_end = range_end(a, op->key, op->prefix, op->end);
    r->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    r->request_delete_range = d;
  } else if (op->kind == ETCD_OP_RANGE) {
    Etcdserverpb__RangeRequest *q = take(a, sizeof *q);
    if (q == NULL) return NULL;
    etcdserverpb__range_request__init(q);
    q->key = bytes(op->key);
    q->range_end = range_end(a, op->key, op->prefix, op->end);
    q->limit = op->limit > 0 && op->limit < ETCD_KVS_MAX ? op->limit : ETCD_KVS_MAX;
    q->revision = op->revision;
    q->count_only = op->count_only != 0;
    r->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    r->request_range = q;
  } else {
    return NULL;
  }
  return r;
}

static Etcdserverpb__RequestOp **ops_pb(arena *a, const etcd_op *ops, int n) {
  Etcdserverpb__RequestOp **v = take(a, (size_t)(n > 0 ? n : 1) * sizeof *v);
  for (int i = 0; v && i < n; i++)
    if ((v[i] = op_pb(a, &ops[i])) == NULL) return NULL;
  return v;
}

static Etcdserverpb__TxnRequest *txn_pb(arena *a, const etcd_txn_req *t) {
  Etcdserverpb__TxnRequest *x = take(a, sizeof *x);
  if (x == NULL || t->ncompare < 0 || t->ncompare > ETCD_TXN_OPS_MAX || t->nsuccess < 0 ||
      t->nsuccess > ETCD_TXN_OPS_MAX || t->nfailure < 0 || t->nfailure > ETCD_TXN_OPS_MAX)
    return NULL;
  etcdserverpb__txn_request__init(x);
  x->compare = take(a, (size_t)(t->ncompare > 0 ? t->ncompare : 1) * sizeof *x->compare);
  if (x->compare == NULL) return NULL;
  for (int i = 0; i < t->ncompare; i++) {
    const etcd_compare *k = &t->compare[i];
    Etcdserverpb__Compare *c = take(a, sizeof *c);
    if (c == NULL || k->key == NULL || (unsigned)k->target > ETCD_CMP_LEASE ||
        (unsigned)k->result > ETCD_CMP_NOT_EQUAL || (k->target == ETCD_CMP_VALUE && !k->value))
      return NULL;
    etcdserverpb__compare__init(c);
    c->result = (Etcdserverpb__Compare__CompareResult)k->result;
    c->target = (Etcdserverpb__Compare__CompareTarget)k->target;
    c->key = bytes(k->key);
    c->range_end = range_end(a, k->key, k->prefix, NULL);
    switch (k->target) {
      case ETCD_CMP_VERSION:
        c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
        c->version = k->number;
        break;
      case ETCD_CMP_CREATE:
        c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
        c->create_revision = k->number;
        break;
      case ETCD_CMP_MOD:
        c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
        c->mod_revision = k->number;
        break;
      case ETCD_CMP_VALUE:
        c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
        c->value = bytes(k->value);
        break;
      default:
        c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
        c->lease = k->number;
        break;
    }
    x->compare[x->n_compare++] = c;
  }
  if ((x->success = ops_pb(a, t->success, t->nsuccess)) == NULL ||
      (x->failure = ops_pb(a, t->failure, t->nfailure)) == NULL)
    return NULL;
  x->n_success = (size_t)t->nsuccess;
  x->n_failure = (size_t)t->nfailure;
  return x;
}

/* ---- decoding ---- */

static char *dup_bytes(ProtobufCBinaryData b, size_t *len) {
  char *s = malloc(b.len + 1);
  if (s == NULL) return NULL;
  if (b.len) memcpy(s, b.data, b.len);
  s[b.len] = '\0';
  *len = b.len;
  return s;
}

static int result_of(const Etcdserverpb__ResponseOp *ro, const etcd_op *op, int64_t rev,
                     etcd_op_result *r) {
  memset(r, 0, sizeof *r);
  r->kind = op->kind;
  r->revision = rev;
  if (op->kind == ETCD_OP_PUT) return ro->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT ? 0 : -1;
  if (op->kind == ETCD_OP_DELETE) {
    if (ro->response_case != ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE) return -1;
    r->count = ro->response_delete_range->deleted;
    return 0;
  }
  if (ro->response_case != ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE) return -1;
  const Etcdserverpb__RangeResponse *rr = ro->response_range;
  if (rr->n_kvs > ETCD_KVS_MAX) return -1;
  r->count = rr->count;
  r->more = rr->more;
  if (rr->n_kvs == 0) return 0;
  if ((r->kvs = calloc(rr->n_kvs, sizeof *r->kvs)) == NULL) return -1;
  for (size_t i = 0; i < rr->n_kvs; i++) {
    const Etcdserverpb__KeyValue *kv = rr->kvs[i];
    etcd_kv *o = &r->kvs[i];
    o->key = dup_bytes(kv->key, &o->key_len);
    o->value = dup_bytes(kv->value, &o->value_len);
    if (o->key == NULL || o->value == NULL) {
      free(o->key);
      free(o->value);
      return -1; /* (the caller clears what came before) */
    }
    o->create_revision = kv->create_revision;
    o->mod_revision = kv->mod_revision;
    o->version = kv->version;
    o->lease = kv->lease;
    r->nkvs++;
  }
  return 0;
}

static int txn_of(const Etcdserverpb__TxnResponse *x, const etcd_txn_req *t, int64_t rev,
                  etcd_txn_result *out) {
  memset(out, 0, sizeof *out);
  out->succeeded = x->succeeded;
  out->revision = rev;
  const etcd_op *ops = x->succeeded ? t->success : t->failure;
  int nops = x->succeeded ? t->nsuccess : t->nfailure;
  if ((int)x->n_responses != nops) return -1;
  if (nops > 0 && (out->results = calloc((size_t)nops, sizeof *out->results)) == NULL) return -1;
  for (int i = 0; i < nops; i++) {
    if (result_of(x->responses[i], &ops[i], rev, &out->results[i]) < 0) {
      out->nresults = i + 1; /* the partial one too: clear frees what it holds */
      etcd_txn_result_clear(out);
      return -1;
    }
    out->nresults++;
  }
  return 0;
}

/* ---- the call ---- */

/* Sends req (packed) as /etcdserverpb.KV/Txn; the answer's bytes in *reply
 * (malloc'd). 0, or -1 with err set. */
static int call(etcd_grpc *g, const char *token, const uint8_t *req, size_t len, long timeout_ms,
                uint8_t **reply, size_t *reply_len, char *err, size_t errlen) {
  *reply = NULL;
  gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                       gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
  grpc_slice method = grpc_slice_from_static_string("/etcdserverpb.KV/Txn");
  grpc_call *c = grpc_channel_create_call(g->ch, NULL, GRPC_PROPAGATE_DEFAULTS, g->cq, method,
                                          NULL, deadline, NULL);
  grpc_slice body = grpc_slice_from_copied_buffer((const char *)req, len);
  grpc_byte_buffer *out = grpc_raw_byte_buffer_create(&body, 1);
  grpc_slice_unref(body);
  grpc_metadata md = {.key = grpc_slice_from_static_string("token"),
                      .value = token ? grpc_slice_from_copied_string(token) : grpc_empty_slice()};
  grpc_metadata_array got_md, trailing;
  grpc_metadata_array_init(&got_md);
  grpc_metadata_array_init(&trailing);
  grpc_byte_buffer *in = NULL;
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = token ? 1 : 0;
  ops[0].data.send_initial_metadata.metadata = token ? &md : NULL;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = out;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &got_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &in;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  int rc = -1;
  if (grpc_call_start_batch(c, ops, 6, c, NULL) == GRPC_CALL_OK) {
    grpc_event ev = grpc_completion_queue_pluck(g->cq, c, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_OP_COMPLETE && ev.success && status == GRPC_STATUS_OK && in) {
      grpc_byte_buffer_reader rd;
      if (grpc_byte_buffer_reader_init(&rd, in)) {
        grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
        size_t n = GRPC_SLICE_LENGTH(all);
        if ((*reply = malloc(n ? n : 1)) != NULL) {
          memcpy(*reply, GRPC_SLICE_START_PTR(all), n);
          *reply_len = n;
          rc = 0;
        }
        grpc_slice_unref(all);
        grpc_byte_buffer_reader_destroy(&rd);
      }
    } else {
      char *d = grpc_slice_to_c_string(details);
      snprintf(err, errlen, "etcd gRPC: status %d: %.200s", (int)status, d ? d : "");
      gpr_free(d);
      /* the member said no (a lease that is gone, a bad txn): not the way there */
      if (status != GRPC_STATUS_UNAVAILABLE && status != GRPC_STATUS_DEADLINE_EXCEEDED &&
          status != GRPC_STATUS_CANCELLED && status != GRPC_STATUS_UNKNOWN &&
          status != GRPC_STATUS_OK)
        rc = -2;
    }
  } else {
    snprintf(err, errlen, "etcd gRPC: the call could not start");
  }
  if (rc < 0 && err[0] == '\0') snprintf(err, errlen, "etcd gRPC: no answer");
  grpc_slice_unref(details);
  grpc_slice_unref(md.value);
  grpc_metadata_array_destroy(&got_md);
  grpc_metadata_array_destroy(&trailing);
  grpc_byte_buffer_destroy(out);
  if (in) grpc_byte_buffer_destroy(in);
  grpc_call_unref(c);
  return rc;
}

int etcd_grpc_txn(etcd_grpc *g, const char *token, const etcd_txn_req *const *ts, int n,
                  etcd_txn_result *outs, long timeout_ms, char *err, size_t errlen) {
  err[0] = '\0';
  for (int i = 0; i < n; i++) memset(&outs[i], 0, sizeof outs[i]);
  if (n < 1 || n > ETCD_TXN_OPS_MAX) return -1;
  arena a = {0};
  Etcdserverpb__TxnRequest *req = NULL;
  if (n == 1) {
    req = txn_pb(&a, ts[0]);
  } else { /* no compare; the n txns nested in its success branch */
    req = take(&a, sizeof *req);
    Etcdserverpb__RequestOp **ok = take(&a, (size_t)n * sizeof *ok);
    if (req && ok) {
      etcdserverpb__txn_request__init(req);
      req->success = ok;
      for (int i = 0; i < n && req; i++) {
        Etcdserverpb__RequestOp *o = take(&a, sizeof *o);
        Etcdserverpb__TxnRequest *inner = txn_pb(&a, ts[i]);
        if (o == NULL || inner == NULL) {
          req = NULL;
          break;
        }
        etcdserverpb__request_op__init(o);
        o->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
        o->request_txn = inner;
        ok[req->n_success++] = o;
      }
    }
  }
  uint8_t *packed = NULL;
  size_t len = 0;
  if (req && !a.failed) {
    len = etcdserverpb__txn_request__get_packed_size(req);
    if ((packed = malloc(len ? len : 1)) != NULL) etcdserverpb__txn_request__pack(req, packed);
  }
  arena_free(&a);
  if (packed == NULL) {
    snprintf(err, errlen, "etcd gRPC: a txn it cannot encode");
    return -1;
  }
  uint8_t *reply = NULL;
  size_t reply_len = 0;
  int rc = call(g, token, packed, len, timeout_ms, &reply, &reply_len, err, errlen);
  free(packed);
  if (rc < 0) {
    atomic_fetch_add(&failed, 1);
    return rc;
  }
  Etcdserverpb__TxnResponse *x = etcdserverpb__txn_response__unpack(NULL, reply_len, reply);
  free(reply);
  int bad = x == NULL || x->header == NULL;
  int64_t rev = bad ? 0 : x->header->revision;
  if (!bad && n == 1) {
    bad = txn_of(x, ts[0], rev, &outs[0]) < 0;
  } else if (!bad) {
    bad = (int)x->n_responses != n;
    for (int i = 0; !bad && i < n; i++) {
      const Etcdserverpb__ResponseOp *ro = x->responses[i];
      bad = ro->response_case != ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN ||
            txn_of(ro->response_txn, ts[i], rev, &outs[i]) < 0;
    }
    for (int i = 0; bad && i < n; i++) etcd_txn_result_clear(&outs[i]);
  }
  if (x) etcdserverpb__txn_response__free_unpacked(x, NULL);
  if (bad) snprintf(err, errlen, "etcd gRPC: a txn answer it cannot read");
  atomic_fetch_add(bad ? &failed : &answered, 1);
  return bad ? -1 : ETCD_OK;
}
