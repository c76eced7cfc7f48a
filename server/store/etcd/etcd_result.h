/* etcd_result.h: the plain types of a call to etcd (codes, bounds, keys,
 * ops, txns and their results) and what frees them (etcd_result.c), which
 * both ways of calling etcd use: etcd_client.c through the JSON gateway,
 * etcd_grpc.c over gRPC. */
#ifndef PICKETD_ETCD_RESULT_H
#define PICKETD_ETCD_RESULT_H

#include <stddef.h>
#include <stdint.h>

/* Results. Every call returns ETCD_OK or one of the negative codes below;
 * the detail is etcd_client_errstr (or the watch's etcd_watch_errstr). */
typedef enum {
  ETCD_OK = 0,
  ETCD_EUNAVAIL = -1,   /* no endpoint answered in time, no leader, quorum lost,
                           "request timed out", "too many requests" */
  ETCD_EREPLY = -2,     /* an answer we cannot use: an error etcd gave, auth
                           refused, bad JSON, a reply over ETCD_REPLY_MAX */
  ETCD_ECOMPACTED = -3, /* a watch or a read at a revision etcd has compacted */
  ETCD_ENOTFOUND = -4,  /* the lease does not exist (expired or revoked) */
  ETCD_ENOSPACE = -5,   /* etcd's backend quota is full: it refuses writes */
  ETCD_EINVAL = -6,     /* bad options or arguments (nothing was sent) */
  ETCD_ESTOPPED = -7,   /* a watch was stopped by etcd_watch_stop */
  ETCD_EAUTH = -8       /* etcd refused the credentials (user, password, token), or wants
                           a user and none is configured */
} etcd_code;

/* Bounds. A reply body larger than ETCD_REPLY_MAX is refused (EREPLY); a
 * range returns at most ETCD_KVS_MAX keys (more is set when etcd has more);
 * a txn holds at most ETCD_TXN_OPS_MAX compares and as many ops per branch
 * (etcd's own default --max-txn-ops is 128); keys are at most ETCD_KEY_MAX
 * bytes. */
#define ETCD_REPLY_MAX (8 * 1024 * 1024)
#define ETCD_KVS_MAX 10000
#define ETCD_TXN_OPS_MAX 128
#define ETCD_KEY_MAX 1024

/* ---- key-value ----------------------------------------------------------- */

typedef enum {
  ETCD_CMP_VERSION,
  ETCD_CMP_CREATE,
  ETCD_CMP_MOD,
  ETCD_CMP_VALUE,
  ETCD_CMP_LEASE
} etcd_cmp_target;
typedef enum {
  ETCD_CMP_EQUAL,
  ETCD_CMP_GREATER,
  ETCD_CMP_LESS,
  ETCD_CMP_NOT_EQUAL
} etcd_cmp_result;

/* One compare of a txn: `target` of `key` `result` `number` (or `value` for
 * ETCD_CMP_VALUE). A missing key has version, create and mod revision 0. */
typedef struct {
  const char *key;
  etcd_cmp_target target;
  etcd_cmp_result result;
  int prefix;        /* the compare holds for every key that starts with key
                        (and for none when no such key exists) */
  int64_t number;    /* VERSION, CREATE, MOD, LEASE */
  const char *value; /* VALUE */
} etcd_compare;

typedef enum { ETCD_OP_RANGE, ETCD_OP_PUT, ETCD_OP_DELETE } etcd_op_kind;

/* One operation: inside a txn, or a plain range (etcd_range). */
typedef struct {
  etcd_op_kind kind;
  const char *key;
  int prefix;        /* RANGE, DELETE: every key that starts with key */
  const char *end;   /* RANGE, DELETE: the keys in [key, end) instead (prefix unused) */
  const char *value; /* PUT */
  int64_t lease;     /* PUT: attach to this lease (0: none) */
  int64_t limit;     /* RANGE: at most this many kvs (0, or over ETCD_KVS_MAX: ETCD_KVS_MAX) */
  int count_only;    /* RANGE: only count the keys */
  int64_t revision;  /* RANGE: read at this revision (0: the latest) */
} etcd_op;

/* One key as etcd keeps it. key and value are malloc'd and NUL-terminated. */
typedef struct {
  char *key;
  size_t key_len;
  char *value;
  size_t value_len;
  int64_t create_revision; /* the revision that created it (since its last delete) */
  int64_t mod_revision;    /* the revision of its last put */
  int64_t version;         /* puts since it was created */
  int64_t lease;           /* 0: none */
} etcd_kv;

/* What one op gave. */
typedef struct {
  etcd_op_kind kind;
  etcd_kv *kvs; /* RANGE: malloc'd array of nkvs (NULL when none) */
  int nkvs;
  int64_t count;    /* RANGE: keys in the range (count_only too); DELETE: keys deleted */
  int more;         /* RANGE: etcd has more keys than the limit let through */
  int64_t revision; /* the store's revision when this answer was made */
} etcd_op_result;

/* Frees what an etcd_kv owns and zeroes it (etcd_result.c, as the two
 * below: the gateway's client and the gRPC one both fill these). */
void etcd_kv_clear(etcd_kv *kv);
/* Frees what an etcd_op_result owns and zeroes it (safe twice). */
void etcd_op_result_clear(etcd_op_result *r);

typedef struct {
  const etcd_compare *compare;
  int ncompare;
  const etcd_op *success; /* run when every compare holds */
  int nsuccess;
  const etcd_op *failure; /* ...and when one does not */
  int nfailure;
} etcd_txn_req;

typedef struct {
  int succeeded;           /* 1: every compare held, success ran */
  int64_t revision;        /* the store's revision after the txn (a write's revision) */
  etcd_op_result *results; /* one per op of the branch that ran, in order; malloc'd */
  int nresults;
} etcd_txn_result;

/* Frees what an etcd_txn_result owns and zeroes it (safe twice). */
void etcd_txn_result_clear(etcd_txn_result *r);

#endif
