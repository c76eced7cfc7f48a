/* codec.h: one Redis call's command and its reply (codec.c): the EVALSHA
 * built from a store_op, and the script's reply read into its result. */
#ifndef PICKETD_CODEC_H
#define PICKETD_CODEC_H

#include <hiredis/hiredis.h>

#include "config.h"
#include "picket_proto.h"
#include "store.h"

enum { SCRIPT_ACQUIRE, SCRIPT_RENEW, SCRIPT_RELEASE, SCRIPT_INSPECT, SCRIPT_QUOTA, SCRIPT_SEM,
       SCRIPT_SEM_INSPECT, SCRIPT_RW, SCRIPT_RW_INSPECT, SCRIPT_LIST, SCRIPT_BREAK, SCRIPT_WATCH,
       SCRIPT_COUNT };

/* The scripts of proto/redis, embedded at build time, and their names
 * (for logs and messages). */
extern const char *const codec_script_src[SCRIPT_COUNT];
extern const char *const codec_script_name[SCRIPT_COUNT];

/* The config the Redis store runs with, set once by codec_init before any
 * call; every file of the store reads it. */
extern const config *store_redis_cfg;

#define KEY_MAX (PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 16)

/* The EVALSHA command of one call; the strings live in the struct. */
typedef struct {
  const char *argv[24];
  int argc;
  char lease_key[KEY_MAX], fence_key[KEY_MAX], token_key[KEY_MAX], ttl[24], max[24];
  char delay[24], cap[24];
  char member[PICKET_PROTO_NAME_MAX + PICKET_PROTO_LEASE_LEN + 8]; /* in a token's count */
  char limit[24], wake[PICKET_PROTO_NAME_MAX + 8], wait[24], readers[24];
  char index_key[KEY_MAX], look[24];
} op_command;

/* Keeps cfg (store_redis_cfg) and the scripts' arguments it fixes (the
 * release channel, --fence-floor, --fence-idle-ttl-ms). */
void codec_init(const config *cfg);

/* The script op's current phase runs. */
int codec_script_of(const store_op *op);

/* Fills cmd for op; -1 when the name cannot make a key. The script's SHA
 * (argv[1]) is the connection's: conn_bind sets it once one is chosen.
 * cmd->lease_key is the key the call is routed by (the token's key in a
 * quota phase): every key of one call shares its hash tag, except the
 * token's key outside a cluster, where slots do not matter. */
int codec_build(const store_op *op, op_command *cmd);
/* The outcome of a name too long for a key (r->err set). */
store_status codec_bad_name(store_result *r);

/* Reads one script's reply (not NOSCRIPT, which the caller handles) into
 * op->r and returns the call's status. Frees rep. */
store_status codec_parse(store_op *op, redisReply *rep);
/* Sorts an error reply of node `node` into unavailable (retry later) or a
 * real error, r->err saying which. */
store_status codec_error(int node, const char *msg, store_result *r);
/* 1 when rep is NOSCRIPT: Redis lost the script (restart, SCRIPT FLUSH). */
int codec_is_noscript(const redisReply *rep);

#endif
