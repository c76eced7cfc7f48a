/* lease_count.c: a token's lease count (proto/redis/leases.lua) around a
 * Redis call, apart from the call's own command and reply so that both
 * the direct path and the pipe take the same phases.
 *
 * On one Redis the lock scripts keep it: the token's key is their third
 * key, and the call stays one EVALSHA. Under Redis Cluster that key is in
 * the token's slot, which one script cannot reach together with the
 * lock's, so an op goes through phases: an acquire first takes the count
 * (quota.lua, on the token's slot), then makes the call; an update after
 * the call (touch after a renew, drop after a release or a failed grant)
 * is an op of its own, sent once the call's reply is in, and its failure
 * is only logged: the entry expires with the lease it counts. */
#include "lease_count.h"

#include "log.h"
#include "node.h"
#include "redis.h"

int lease_count_counts(const store_op *op) {
  return op->token && op->max_leases > 0 && store_op_base(op->kind) != STORE_OP_INSPECT;
}
int lease_count_apart(const store_op *op) { return lease_count_counts(op) && node_is_cluster(); }

/* The first phase of op, before its first send. */
void lease_count_begin(store_op *op) {
  redis_op_of(op)->phase =
      lease_count_apart(op) && store_op_base(op->kind) == STORE_OP_ACQUIRE ? PHASE_TAKE
                                                                            : PHASE_CALL;
  redis_op_of(op)->quota_added = 0;
}

/* After a take: 1 when the call itself goes out next (op->phase moved on). */
int lease_count_taken(store_op *op) {
  redis_op *ro = redis_op_of(op);
  if (ro->phase != PHASE_TAKE || op->st != STORE_OK) return 0;
  ro->phase = PHASE_CALL;
  return 1;
}

/* The count update op's outcome calls for once it is complete: "touch",
 * "drop", or NULL for none (or when the scripts keep the count). */
const char *lease_count_note_of(const store_op *op) {
  const redis_op *ro = redis_op_view(op);
  if (ro->phase != PHASE_CALL || !lease_count_apart(op)) return NULL;
  switch (store_op_base(op->kind)) {
    case STORE_OP_ACQUIRE: return op->st != STORE_OK && ro->quota_added ? "drop" : NULL;
    case STORE_OP_RENEW: return op->st == STORE_OK ? "touch" : NULL;
    case STORE_OP_RELEASE: return op->st == STORE_OK ? "drop" : NULL;
    default: return NULL;
  }
}

void lease_count_note(store_op *note, const char *verb) {
  redis_op_of(note)->phase = PHASE_NOTE;
  redis_op_of(note)->note = verb;
}

void lease_count_note_failed(const store_op *note) {
  LOG(LOG_WARN, "token '%s': lease count of %s not updated (%s): it expires with the lease",
      note->token, note->name, note->r.err);
}
