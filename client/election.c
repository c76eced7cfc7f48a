/* election.c: leader elections in libpicket (picketd's /v1/elections/;
 * docs/elections.md): the leadership a campaign grants, with its term and
 * value, proclaiming a new value, resigning, and reading who leads, from
 * a GET or from a leader event.
 *
 * Why so little is here: an election is a lease with a term. The leader
 * holds a lease on the election, and the term is that grant's fence. So a
 * leadership *is* a picket_lease of the kind PICKET__KIND_ELECTION, and
 * picket.c's calls route it (campaign for acquire, term for fence, resign
 * for release; its table of kinds): campaigning is acquiring, with its
 * retries under a client-chosen id and its local deadline; renewing,
 * resigning and the keeper (renewal, loss, and the watch of the
 * election's leader events, events.c) are the lease's own. What a lease
 * lacks, a leader's value, lives in the picket_leadership around it. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "picket_proto.h"

struct picket_leadership {
  picket_lease *lease; /* kind PICKET__KIND_ELECTION; owned */
  char *value;         /* NULL: none; owned */
};

/* A value a leader may carry (picketd's rule): 0..PICKET_ELECTION_VALUE_MAX
 * bytes of UTF-8 without control characters. */
static int value_valid(const char *v) { return picket_proto_value_valid(v, strlen(v)); }

int picket_campaign(picket_client *c, const char *name, const picket_campaign_opts *opts,
                    picket_leadership **out) {
  picket_campaign_opts none = {0};
  *out = NULL;
  if (c == NULL) return PICKET_EINVAL;
  if (opts == NULL) opts = &none;
  if (opts->value != NULL && !value_valid(opts->value))
    return picket__client_fail(c, PICKET_EINVAL,
                               "a value is at most 4096 bytes of UTF-8 without control characters");
  picket_leadership *l = calloc(1, sizeof *l);
  if (l == NULL || (opts->value != NULL && (l->value = strdup(opts->value)) == NULL)) {
    picket_leadership_free(l);
    return picket__client_fail(c, PICKET_ENOMEM, "out of memory");
  }
  picket_acquire_opts a = {.ttl_ms = opts->ttl_ms, .wait_ms = opts->wait_ms,
                           .owner = opts->owner, .lease_id = opts->lease_id};
  int err = picket__acquire(c, PICKET__KIND_ELECTION, name, 0, &a, opts->value, &l->lease);
  if (err != 0) {
    picket_leadership_free(l);
    return err;
  }
  *out = l;
  return 0;
}

int picket_leadership_new(const char *election, const char *lease_id, picket_leadership **out) {
  *out = NULL;
  picket_leadership *l = calloc(1, sizeof *l);
  if (l == NULL) return PICKET_ENOMEM;
  int err = picket__lease_new(PICKET__KIND_ELECTION, election, lease_id, &l->lease);
  if (err != 0) {
    free(l);
    return err;
  }
  *out = l;
  return 0;
}

void picket_leadership_free(picket_leadership *l) {
  if (l == NULL) return;
  picket_lease_free(l->lease);
  free(l->value);
  free(l);
}

const char *picket_leadership_election(const picket_leadership *l) {
  return picket_lease_lock(l->lease);
}
int64_t picket_leadership_term(const picket_leadership *l) { return picket_lease_fence(l->lease); }
const char *picket_leadership_value(const picket_leadership *l) { return l->value; }
picket_lease *picket_leadership_lease(const picket_leadership *l) { return l->lease; }
const char *picket_leadership_token(const picket_leadership *l) {
  return picket_lease_fence_token(l->lease);
}
int64_t picket_leadership_deadline_ms(const picket_leadership *l) {
  return picket_lease_deadline_ms(l->lease);
}

int picket_renew_leadership(picket_client *c, picket_leadership *l, int64_t ttl_ms) {
  if (l == NULL) return picket__client_fail(c, PICKET_EINVAL, "no leadership");
  return picket_renew(c, l->lease, ttl_ms);
}

int picket_resign(picket_client *c, picket_leadership *l) {
  if (l == NULL) return picket__client_fail(c, PICKET_EINVAL, "no leadership");
  return picket_release(c, l->lease);
}

int picket_proclaim(picket_client *c, picket_leadership *l, const char *value, int64_t ttl_ms) {
  if (l == NULL) return picket__client_fail(c, PICKET_EINVAL, "no leadership");
  if (value != NULL && !value_valid(value))
    return picket__client_fail(c, PICKET_EINVAL,
                               "a value is at most 4096 bytes of UTF-8 without control characters");
  char *copy = value != NULL ? strdup(value) : NULL;
  json_t *body = json_pack("{so}", "value", value ? json_string(value) : json_null());
  if ((value != NULL && copy == NULL) || body == NULL) {
    free(copy);
    json_decref(body);
    return picket__client_fail(c, PICKET_ENOMEM, "out of memory");
  }
  /* A proclaim renews too, and its reply is a renew's with the value: the
   * lease's TTL and deadline move as by a renewal. */
  int err = picket__renew_verb(c, l->lease, "proclaim", body, ttl_ms);
  if (err != 0) {
    free(copy);
    return err;
  }
  free(l->value);
  l->value = copy;
  return 0;
}

/* A string-or-null member into has/buf (cap bytes): 0, or -1 when it has
 * another type or does not fit. */
static int take_text(const json_t *v, int *has, char *buf, size_t cap) {
  *has = 0;
  buf[0] = '\0';
  if (v == NULL || json_is_null(v)) return 0;
  if (!json_is_string(v) || json_string_length(v) >= cap) return -1;
  memcpy(buf, json_string_value(v), json_string_length(v) + 1);
  *has = 1;
  return 0;
}

int picket__leader_take(const json_t *j, picket_leader_info *info) {
  memset(info, 0, sizeof *info);
  info->candidates = -1;
  json_t *leader = json_object_get(j, "leader");
  info->last_term = picket__json_int(j, "term", 0);
  if (!json_is_object(j) || info->last_term < 0 || leader == NULL) return -1;
  if (json_is_null(leader)) return 0;
  info->has_leader = 1;
  info->term = picket__json_int(leader, "term", 1);
  info->since_ms = picket__json_int(leader, "since", 0);
  info->ttl_ms = picket__json_int(leader, "ttl_ms", 0);
  if (!json_is_object(leader) || info->term < 1 || info->since_ms < 0 || info->ttl_ms < 0 ||
      take_text(json_object_get(leader, "value"), &info->has_value, info->value,
                sizeof info->value) < 0 ||
      picket__json_owner(json_object_get(leader, "owner"), &info->has_owner, info->owner,
                         sizeof info->owner) < 0)
    return -1;
  return 0;
}

int picket_leader(picket_client *c, const char *name, picket_leader_info *info) {
  json_t *reply = NULL;
  memset(info, 0, sizeof *info);
  int err = picket__get_state(c, PICKET__KIND_ELECTION, name, &reply);
  if (err != 0) return err;
  const char *election = json_string_value(json_object_get(reply, "election"));
  int64_t candidates = picket__json_int(reply, "candidates", 0);
  if (election == NULL || strcmp(election, name) != 0 || candidates < 0 ||
      picket__leader_take(reply, info) < 0) {
    json_decref(reply);
    memset(info, 0, sizeof *info);
    return picket__proto_error(c, "election reply lacks election, leader, term or candidates");
  }
  info->candidates = candidates;
  json_decref(reply);
  return 0;
}

int picket_event_leader(const picket_event *ev, picket_leader_info *info) {
  memset(info, 0, sizeof *info);
  if (ev == NULL || ev->type != PICKET_EVENT_LEADER || ev->data == NULL) return PICKET_EINVAL;
  json_t *j = json_loads(ev->data, 0, NULL);
  /* the watch checked it when it read it: it cannot fail here */
  int r = picket__leader_take(j, info);
  json_decref(j);
  return r == 0 ? 0 : PICKET_EINVAL;
}
