/* conns_token.c: connections per token (see conns_token.h), issue 39.
 *
 * Why. Under --auth-file a connection that shows a valid token leaves its
 * address group's count and the loop's count of unauthenticated
 * connections (conns.c): a token holder must get in past a flood of
 * strangers. Unbounded, that let any token, even a read-only one, take
 * every slot of --max-connections from one address, and other tenants'
 * calls hung in the listen backlog. So a token's connections are bounded
 * by the token instead: --max-connections-per-token, counted across every
 * loop. A connection is counted in when the first request on it is
 * authenticated; one that would put its token over the cap is never
 * counted in: it stays an unauthenticated connection (in its group's
 * count, under the loop's share, so outside the reserve) and is answered
 * 429 too_many_connections and closed. A token at its cap therefore
 * cannot take reserve slots either: the reserve is left to tokens that
 * have not used theirs up.
 *
 * A token is its name and hash: a token replaced under its name (a
 * rotation) is another token, so the old secret's connections are
 * revoked by the reload that replaced it, and the new one starts its own
 * count.
 *
 * Revocation. A reload swaps the table (auth.c), then conns_token_revoke
 * asks, for each token with connections, whether the current table still
 * has it. The connections of one that is gone are marked revoked and
 * shut down for reading only: every reader of the socket then sees the
 * end of the stream (libmicrohttpd for an idle keep-alive connection,
 * wait.c for a waiting acquire, events.c for an event stream), while its
 * write side stays open, so that http.c can still answer a waiting
 * acquire 401 before the close. A token that remains has its reference
 * moved to the current table, so an old table is not kept alive by
 * connections that outlive it.
 *
 * One table under one mutex, taken once when a connection is counted in,
 * once when it closes, and by a reload. A connection's socket is shut
 * down under that mutex, and conns_token_leave (before the socket closes)
 * takes it, so a revocation never touches a closed or reused descriptor. */
#include "conns_token.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "metrics.h"

#define BUCKETS 1024

struct conns_token {
  auth_principal *who;        /* a reference: the token as of the last reload */
  int count;                  /* connections counted in */
  conns_token_member *head;   /* ...and the list of them */
  int removed;                /* off the table: its token is gone, its connections closing */
  conns_token *next;          /* in its bucket */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static conns_token *table[BUCKETS];
static int cap;

void conns_token_init(const config *cfg) {
  cap = cfg->max_conns_per_token;
  if (cap == CONFIG_AUTO) cap = cfg->max_connections >= 4 ? cfg->max_connections / 4 : 1;
}

int conns_token_cap(void) { return cap; }

static unsigned bucket(const char *name) {
  unsigned h = 2166136261u; /* FNV-1a */
  for (; *name; name++) h = (h ^ (unsigned char)*name) * 16777619u;
  return h % BUCKETS;
}

int conns_token_join(conns_token_member *m, auth_principal *who, int fd) {
  unsigned b = bucket(auth_name(who));
  pthread_mutex_lock(&mu);
  conns_token *t = table[b];
  while (t && !auth_same(t->who, who)) t = t->next;
  if (t && cap > 0 && t->count >= cap) {
    pthread_mutex_unlock(&mu);
    metrics_inc(M_CONN_REFUSED_PER_TOKEN);
    return -1;
  }
  if (t == NULL && (t = calloc(1, sizeof *t)) != NULL) {
    t->who = auth_ref(who);
    t->next = table[b];
    table[b] = t;
  }
  if (t) { /* out of memory: counted against nothing, as without --auth-file */
    m->token = t;
    m->fd = fd;
    m->prev = NULL;
    m->next = t->head;
    if (t->head) t->head->prev = m;
    t->head = m;
    t->count++;
  }
  pthread_mutex_unlock(&mu);
  return 0;
}

/* t off the table (mu held). */
static void unlink_token(conns_token *t) {
  for (conns_token **p = &table[bucket(auth_name(t->who))]; *p; p = &(*p)->next)
    if (*p == t) {
      *p = t->next;
      return;
    }
}

void conns_token_leave(conns_token_member *m) {
  conns_token *t = m->token;
  if (t == NULL) return;
  pthread_mutex_lock(&mu);
  if (m->prev) m->prev->next = m->next;
  else t->head = m->next;
  if (m->next) m->next->prev = m->prev;
  m->token = NULL;
  if (--t->count == 0) {
    if (!t->removed) unlink_token(t);
    auth_put(t->who);
    free(t);
  }
  pthread_mutex_unlock(&mu);
}

int conns_token_revoked(const conns_token_member *m) { return atomic_load(&m->revoked); }

int conns_token_revoke(void) {
  int revoked = 0;
  pthread_mutex_lock(&mu);
  for (int b = 0; b < BUCKETS; b++)
    for (conns_token **p = &table[b]; *p;) {
      conns_token *t = *p;
      auth_principal *now = auth_current(t->who);
      if (now) {
        auth_put(t->who);
        t->who = now;
        p = &t->next;
        continue;
      }
      *p = t->next; /* a token that comes back later starts a count of its own */
      t->removed = 1;
      for (conns_token_member *m = t->head; m; m = m->next) {
        atomic_store(&m->revoked, 1);
        if (!atomic_load(&m->waiting)) shutdown(m->fd, SHUT_RD);
        metrics_inc(M_CONN_CUT_TOKEN_REMOVED);
        revoked++;
      }
    }
  pthread_mutex_unlock(&mu);
  return revoked;
}

void conns_token_free(void) {
  pthread_mutex_lock(&mu);
  for (int b = 0; b < BUCKETS; b++)
    while (table[b]) {
      conns_token *t = table[b];
      table[b] = t->next;
      auth_put(t->who);
      free(t);
    }
  pthread_mutex_unlock(&mu);
}
