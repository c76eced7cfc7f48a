/* sentinel_link.c: one thread per sentinel, and the primary lease.
 *
 * Each --sentinel address gets a thread of its own that keeps two
 * connections to it: a subscription to the failover announcements
 * (+sdown, +odown, +try-failover, +selected-slave, +promoted-slave,
 * +switch-master) and a command connection that asks SENTINEL MASTER every
 * few tens of milliseconds. A sentinel that cannot be reached blocks only
 * its own thread, so the others' announcements are acted on at once (one
 * watcher thread used to wait out --redis-timeout-ms on a dead node while
 * the leader's +selected-slave sat unread: in the chaos suite that let
 * grants land on a primary being deposed).
 *
 * The primary lease. WAIT is not consensus: a primary cut off from the
 * sentinels (with a picketd and one replica) keeps taking grants, and its
 * replica keeps acknowledging them, after the sentinels have promoted
 * another node; those grants vanish when it is demoted, and their fences
 * are handed out again on the new primary. Sentinel's own rules bound when
 * a promotion can happen, and picketd grants only inside that bound:
 *  - a sentinel flags the master subjectively down (s_down) only after
 *    down-after-milliseconds (D) without an answer to its PINGs;
 *  - a failover needs the master objectively down: `quorum` (q) sentinels
 *    flagging s_down (a leader counts another's "down" answer for 5 s);
 *  - so while N - q + 1 sentinels are each known not to have flagged it,
 *    and to be unable to for a while, no failover of a dead master can
 *    start before that while ends.
 * A poll of sentinel S sent at t that shows the master's address, no
 * s_down/o_down/failover flag, and the oldest unanswered PING e ms old
 * (last-ping-sent) proves S cannot flag s_down before t + D - e; half of
 * that margin is taken, S counts until t + (D - e) / 2, and the lease is
 * held until the (N - q + 1)-th latest of those times. A sentinel that
 * was seen in trouble (a flag, an announcement, e above D / 2), or that
 * went unobserved long enough to have flagged and recovered unseen, does
 * not count for DIRTY_MS: the leader may still be counting its "down".
 * And one sentinel that says a failover is under way (o_down,
 * failover_in_progress, +odown, +try-failover) ends the lease outright
 * for as long: that needs no count (a forced SENTINEL FAILOVER flags
 * nothing down, and its leader promotes within a tick or two).
 * node.c refuses lock calls outside the lease and distrusts a reply that
 * arrives after it lapsed (node_current). What the lease does not cover:
 * a forced SENTINEL FAILOVER run by a sentinel this picketd cannot hear
 * (nothing else is flagged), and sentinels whose clocks step (Sentinel
 * times PINGs with the wall clock). docs/failures.md says what
 * the chaos suite measured. */
#include "sentinel_link.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "node.h"

#define POLL_MAX_MS 100    /* between two polls of one sentinel (D / 8 when that is less) */
#define POLL_MIN_MS 10
#define RETRY_MS 250       /* between connection attempts to a sentinel */
#define PING_MS 1000       /* silence on the subscription before a PING */
#define DIRTY_MS 6000      /* a sentinel seen in trouble does not count this long */

/* One sentinel's link. The connections belong to its thread; the fields
 * below `mu` are shared (the lease is computed from all links). */
typedef struct {
  int i;
  pthread_t thread;
  int started;
  redisContext *cmd, *sub;
  int64_t next_cmd_ms, next_sub_ms; /* reconnect times */
  int64_t ping_sent_ms, next_ping_ms; /* the subscription's health check */
  /* under mu */
  int heard;              /* a connection to it works */
  int64_t confirm_until;  /* it cannot start a failover before this (0: no such promise) */
  int64_t dirty_until;    /* it does not count before this */
  int64_t bound_ms;       /* the last good poll: no s_down before this */
  int quorum, sentinels;  /* as it reports them (0: not yet) */
  char dirty_addr[300];   /* the master it was in trouble with */
  int veto;               /* the trouble was a failover under way (o_down, failover_in_progress) */
  char why[160];          /* why it does not confirm */
  char named[300];        /* the master its last answer named, "host:port" ("": none yet) */
  int64_t epoch;          /* and that answer's config-epoch */
} link_t;

static const config *cfg;
static sentinel_link_event_fn *event_fn;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static link_t links[CONFIG_SENTINELS_MAX];
static atomic_int stopping;
static int stop_fd = -1; /* eventfd, readable at stop */

redisContext *sentinel_link_open(const config *c, int i, char *err, size_t errlen) {
  const sentinel_addr *a = &c->sentinels[i];
  struct timeval tv = {(time_t)(c->redis_timeout_ms / 1000),
                       (suseconds_t)((c->redis_timeout_ms % 1000) * 1000)};
  redisContext *ctx = redisConnectWithTimeout(a->host, a->port, tv);
  if (ctx == NULL || ctx->err) {
    snprintf(err, errlen, "sentinel %s:%d: %s", a->host, a->port, ctx ? ctx->errstr : "out of memory");
    if (ctx) redisFree(ctx);
    return NULL;
  }
  redisSetTimeout(ctx, tv);
  redisEnableKeepAlive(ctx);
  if (c->sentinel_password[0]) {
    redisReply *r = redisCommand(ctx, "AUTH %s", c->sentinel_password);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    snprintf(err, errlen, "sentinel %s:%d refused AUTH: %.100s", a->host, a->port,
             r && r->type == REDIS_REPLY_ERROR ? r->str : ctx->errstr);
    if (r) freeReplyObject(r);
    if (!ok) {
      redisFree(ctx);
      return NULL;
    }
  }
  return ctx;
}

int sentinel_link_up(void) {
  int n = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < cfg->sentinel_count; i++) n += links[i].heard;
  pthread_mutex_unlock(&mu);
  return n;
}

int64_t sentinel_link_epoch(void) {
  int64_t max = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < cfg->sentinel_count; i++)
    if (links[i].epoch > max) max = links[i].epoch;
  pthread_mutex_unlock(&mu);
  return max;
}

int sentinel_link_names_after(const char *addr, int64_t epoch) {
  int yes = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < cfg->sentinel_count && !yes; i++)
    yes = links[i].epoch > epoch && strcmp(links[i].named, addr) == 0;
  pthread_mutex_unlock(&mu);
  return yes;
}

/* ---- the lease ------------------------------------------------------ */

static int cmp_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Computes the lease from every link and hands it to the node table.
 * Called with mu held, after any link's state changed. */
static void lease_update_locked(void) {
  int n = cfg->sentinel_count, total = n, q = 0;
  int64_t now = clock_mono_ms(), until[CONFIG_SENTINELS_MAX];
  for (int i = 0; i < n; i++) {
    const link_t *L = &links[i];
    if (L->sentinels > total) total = L->sentinels;
    if (L->quorum > q) q = L->quorum;
    until[i] = L->dirty_until > now ? 0 : L->confirm_until;
  }
  char why[600];
  int64_t lease = 0;
  /* A failover under way vetoes the primary it is taking the role from,
   * or any while picketd knows none. Once the leader has seen its pick
   * promoted and picketd follows it, the leader still flags the old
   * master failover_in_progress until the other replica has been
   * repointed (a second or so); that is no longer about this primary. */
  node_info ni;
  node_describe(&ni);
  int veto = -1;
  for (int i = 0; i < n && veto < 0; i++)
    if (links[i].veto && links[i].dirty_until > now &&
        (ni.primary[0] == '\0' || strcmp(links[i].dirty_addr, ni.primary) == 0))
      veto = i;
  if (veto >= 0) {
    snprintf(why, sizeof why, "sentinel %s:%d %s: a failover may be under way",
             cfg->sentinels[veto].host, cfg->sentinels[veto].port, links[veto].why);
  } else if (q == 0) {
    snprintf(why, sizeof why, "no sentinel has described master '%s' yet", cfg->sentinel_master);
  } else {
    int need = total - q + 1;
    if (need < 1) need = 1;
    qsort(until, (size_t)n, sizeof until[0], cmp_desc);
    if (need <= n) lease = until[need - 1];
    int len = snprintf(why, sizeof why,
                       "%d of the %d sentinels (quorum %d) must confirm, within half their "
                       "down-after-milliseconds, that the primary is up and not being failed "
                       "over%s",
                       need, total, q, need > n ? " (picketd knows too few of them: list them "
                                                  "all in --sentinel)" : "");
    for (int i = 0; i < n && len > 0 && (size_t)len < sizeof why; i++)
      if (links[i].why[0] && !(links[i].dirty_until <= now && links[i].confirm_until > now))
        len += snprintf(why + len, sizeof why - (size_t)len, "; %s:%d %s",
                        cfg->sentinels[i].host, cfg->sentinels[i].port, links[i].why);
  }
  /* Why it is not confirmed changes with every sentinel's state; at
   * debug level each change is logged, to follow a failover. */
  static char last_why[sizeof why];
  if (strcmp(why, last_why) != 0 && lease == 0) LOG(LOG_DEBUG, "sentinel lease: %s", why);
  snprintf(last_why, sizeof last_why, "%s", why);
  node_sentinel_lease(lease, why);
}

/* Marks link L as in trouble with the master at addr (a flag or an
 * announcement): it stops counting for DIRTY_MS, unless the sentinels
 * name another master before that (the trouble was the old one's, and a
 * switch resets what Sentinel counted against it). `veto`: the trouble
 * says a failover is under way (the master objectively down, a failover
 * started): then no lease at all, however many others confirm, for a
 * forced SENTINEL FAILOVER needs no quorum to flag anything. Called with
 * mu held. */
static void dirty_locked(link_t *L, const char *addr, const char *why, int veto) {
  int64_t now = clock_mono_ms();
  if (veto || L->dirty_until <= now || strcmp(L->dirty_addr, addr) != 0) L->veto = veto;
  L->dirty_until = now + DIRTY_MS;
  L->confirm_until = 0;
  snprintf(L->dirty_addr, sizeof L->dirty_addr, "%s", addr);
  snprintf(L->why, sizeof L->why, "%s", why);
}

/* ---- polls ---------------------------------------------------------- */

/* The value of `key` in a SENTINEL MASTER reply (a flat key, value array). */
static const char *field(const redisReply *r, const char *key) {
  for (size_t j = 0; j + 1 < r->elements; j += 2)
    if (r->element[j]->type == REDIS_REPLY_STRING && r->element[j + 1]->type == REDIS_REPLY_STRING &&
        strcmp(r->element[j]->str, key) == 0)
      return r->element[j + 1]->str;
  return "";
}

/* Whether the comma-separated `flags` has `flag`. */
static int has_flag(const char *flags, const char *flag) {
  size_t n = strlen(flag);
  for (const char *p = flags; (p = strstr(p, flag)) != NULL; p += n)
    if ((p == flags || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
  return 0;
}

/* Asks sentinel L for its view of the master and updates what it promises.
 * -1 when the connection failed (it is closed). */
static int poll_master(link_t *L, int64_t *down_after) {
  int64_t sent = clock_mono_ms();
  redisReply *r = redisCommand(L->cmd, "SENTINEL MASTER %s", cfg->sentinel_master);
  int64_t got = clock_mono_ms();
  char why[160] = "";
  if (r == NULL) {
    pthread_mutex_lock(&mu);
    snprintf(L->why, sizeof L->why, "does not answer (%.120s)", L->cmd->errstr);
    L->heard = L->sub != NULL;
    lease_update_locked();
    pthread_mutex_unlock(&mu);
    redisFree(L->cmd);
    L->cmd = NULL;
    L->next_cmd_ms = got + RETRY_MS;
    return -1;
  }
  node_info ni;
  node_describe(&ni);
  int64_t d = 0, e = 0, epoch = 0;
  int quorum = 0, sentinels = 0;
  char addr[300] = "";
  int veto = 0;
  if (r->type == REDIS_REPLY_ERROR) {
    snprintf(why, sizeof why, "answers %.140s", r->str);
  } else if (r->type != REDIS_REPLY_ARRAY) {
    snprintf(why, sizeof why, "odd reply to SENTINEL MASTER");
  } else {
    const char *flags = field(r, "flags");
    snprintf(addr, sizeof addr, "%s:%s", field(r, "ip"), field(r, "port"));
    d = atoll(field(r, "down-after-milliseconds"));
    e = atoll(field(r, "last-ping-sent"));
    /* A link that dropped with no PING out counts from its last answer. */
    if (has_flag(flags, "disconnected")) {
      int64_t ok_ago = atoll(field(r, "last-ok-ping-reply"));
      if (ok_ago > e) e = ok_ago;
    }
    epoch = atoll(field(r, "config-epoch"));
    quorum = atoi(field(r, "quorum"));
    sentinels = atoi(field(r, "num-other-sentinels")) + 1;
    if (d <= 0 || quorum <= 0)
      snprintf(why, sizeof why, "odd reply to SENTINEL MASTER (no down-after or quorum)");
    else if (has_flag(flags, "o_down") || has_flag(flags, "failover_in_progress"))
      snprintf(why, sizeof why, "flags the master %.100s", flags), veto = 1;
    else if (has_flag(flags, "s_down"))
      snprintf(why, sizeof why, "flags the master %.100s", flags);
    else if (e > d / 2)
      snprintf(why, sizeof why, "has had no answer from the master for %lld ms (down after %lld)",
               (long long)e, (long long)d);
    else if (strcmp(field(r, "role-reported"), "master") != 0)
      snprintf(why, sizeof why, "hears the master say it is a %.40s", field(r, "role-reported"));
    else if (ni.primary[0] == '\0' || strcmp(addr, ni.primary) != 0)
      snprintf(why, sizeof why, "names %.100s as the master", addr);
  }
  freeReplyObject(r);
  *down_after = d;

  pthread_mutex_lock(&mu);
  L->heard = 1;
  /* What it names, and under which config-epoch, is recorded only from a
   * view with no failover under way (veto): between +promoted-slave and
   * its own +switch-master, a failover's leader reports the deposed
   * primary's address under the failover's new config-epoch. Taken as
   * is, that looks like a failover back to the deposed node (see
   * sentinel_link_names_after), and sent picketd back to it. */
  if (addr[0] && strcmp(addr, ":") != 0 && !veto) {
    snprintf(L->named, sizeof L->named, "%s", addr);
    L->epoch = epoch;
  }
  if (quorum > 0) L->quorum = quorum;
  if (sentinels > 0) L->sentinels = sentinels;
  int trouble = why[0] && (strncmp(why, "flags", 5) == 0 || strncmp(why, "has had", 7) == 0 ||
                           strncmp(why, "hears", 5) == 0);
  if (trouble) {
    dirty_locked(L, addr, why, veto);
    L->bound_ms = 0; /* seen, in trouble: the dirt covers it, not the gap check below */
  } else if (why[0]) {
    /* Not confirming, but no sign of a failure either (it names another
     * node: a failover this picketd follows, or one it has yet to). */
    L->confirm_until = 0;
    L->bound_ms = 0;
    snprintf(L->why, sizeof L->why, "%s", why);
  } else {
    /* Seen clean. If it went unobserved for longer than its last promise,
     * it may have flagged s_down and recovered in between, and a leader
     * may still count that "down": it waits out DIRTY_MS first. */
    if (L->dirty_until > got && strcmp(L->dirty_addr, addr) != 0) L->dirty_until = 0;
    if (L->bound_ms && got > L->bound_ms) dirty_locked(L, addr, "was not heard for a while", 0);
    L->bound_ms = sent + d - e;
    L->confirm_until = sent + (d - e) / 2;
    if (L->dirty_until <= got) L->why[0] = '\0';
  }
  lease_update_locked();
  pthread_mutex_unlock(&mu);
  return 0;
}

/* ---- announcements -------------------------------------------------- */

static int subscribe(link_t *L, char *err, size_t errlen) {
  redisContext *c = sentinel_link_open(cfg, L->i, err, errlen);
  if (c == NULL) return -1;
  redisReply *r = redisCommand(c, "SUBSCRIBE +sdown +odown +try-failover +selected-slave "
                                  "+promoted-slave +switch-master");
  int ok = r && r->type == REDIS_REPLY_ARRAY;
  if (r) freeReplyObject(r);
  if (!ok) {
    snprintf(err, errlen, "sentinel %s:%d: SUBSCRIBE failed", cfg->sentinels[L->i].host,
             cfg->sentinels[L->i].port);
    redisFree(c);
    return -1;
  }
  /* The replies still owed (one per further channel) are read, and
   * ignored, as messages. */
  L->sub = c;
  L->ping_sent_ms = 0;
  L->next_ping_ms = clock_mono_ms() + PING_MS;
  return 0;
}

static void unsubscribe(link_t *L, const char *why) {
  LOG(LOG_INFO, "subscription to sentinel %s:%d lost (%s)", cfg->sentinels[L->i].host,
      cfg->sentinels[L->i].port, why);
  redisFree(L->sub);
  L->sub = NULL;
  L->next_sub_ms = clock_mono_ms() + RETRY_MS;
  pthread_mutex_lock(&mu);
  L->heard = L->cmd != NULL;
  pthread_mutex_unlock(&mu);
}

/* One message. "+sdown", "+odown" and "+try-failover" about our master
 * ("master <name> <ip> <port> ...") make this sentinel stop counting for
 * the lease; those about replicas and sentinels are ignored. Every
 * announcement goes on to sentinel.c. */
static void on_message(link_t *L, const redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
      r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0 ||
      r->element[1]->type != REDIS_REPLY_STRING || r->element[2]->type != REDIS_REPLY_STRING)
    return;
  const char *chan = r->element[1]->str, *msg = r->element[2]->str;
  char type[16], name[128];
  if (strcmp(chan, "+sdown") == 0 || strcmp(chan, "+odown") == 0 ||
      strcmp(chan, "+try-failover") == 0) {
    char ip[256], addr[300];
    int port;
    if (sscanf(msg, "%15s %127s %255s %d", type, name, ip, &port) != 4 ||
        strcmp(type, "master") != 0 || strcmp(name, cfg->sentinel_master) != 0)
      return;
    char why[160];
    snprintf(why, sizeof why, "announced %s", chan);
    snprintf(addr, sizeof addr, "%s:%d", ip, port);
    pthread_mutex_lock(&mu);
    dirty_locked(L, addr, why, strcmp(chan, "+sdown") != 0);
    lease_update_locked();
    pthread_mutex_unlock(&mu);
    LOG(LOG_WARN, "sentinel %s:%d announces %s for '%s'", cfg->sentinels[L->i].host,
        cfg->sentinels[L->i].port, chan, name);
    return;
  }
  event_fn(chan, msg);
}

/* Reads what the subscription sent; -1 when its connection is gone. */
static int sub_read(link_t *L) {
  if (redisBufferRead(L->sub) != REDIS_OK) return -1;
  redisReply *r = NULL;
  while (redisGetReplyFromReader(L->sub, (void **)&r) == REDIS_OK && r != NULL) {
    on_message(L, r);
    freeReplyObject(r);
    r = NULL;
    L->ping_sent_ms = 0; /* any traffic shows the sentinel alive */
    L->next_ping_ms = clock_mono_ms() + PING_MS;
  }
  return L->sub->err ? -1 : 0;
}

/* PING after PING_MS of silence; -1 when the answer takes longer than
 * --redis-timeout-ms or cannot be sent. */
static int sub_ping(link_t *L, int64_t now, char *err, size_t errlen) {
  if (L->ping_sent_ms && now - L->ping_sent_ms >= cfg->redis_timeout_ms) {
    snprintf(err, errlen, "no answer to PING within %lld ms", (long long)cfg->redis_timeout_ms);
    return -1;
  }
  if (L->ping_sent_ms || now < L->next_ping_ms) return 0;
  int done = 0;
  if (redisAppendCommand(L->sub, "PING") != REDIS_OK) return -1;
  while (!done)
    if (redisBufferWrite(L->sub, &done) != REDIS_OK) return -1;
  L->ping_sent_ms = now;
  return 0;
}

/* ---- the thread ----------------------------------------------------- */

static void *link_main(void *arg) {
  link_t *L = arg;
  int64_t next_poll = 0, poll_ms = POLL_MAX_MS;
  char err[240];
  while (!atomic_load(&stopping)) {
    int64_t now = clock_mono_ms();
    if (L->sub == NULL && now >= L->next_sub_ms) {
      if (subscribe(L, err, sizeof err) < 0) {
        L->next_sub_ms = clock_mono_ms() + RETRY_MS;
      } else {
        pthread_mutex_lock(&mu);
        L->heard = 1;
        pthread_mutex_unlock(&mu);
      }
    }
    now = clock_mono_ms();
    if (L->cmd == NULL && now >= L->next_cmd_ms) {
      L->cmd = sentinel_link_open(cfg, L->i, err, sizeof err);
      if (L->cmd == NULL) {
        L->next_cmd_ms = clock_mono_ms() + RETRY_MS;
        pthread_mutex_lock(&mu);
        snprintf(L->why, sizeof L->why, "cannot be reached (%.120s)", err);
        lease_update_locked();
        pthread_mutex_unlock(&mu);
      }
    }
    now = clock_mono_ms();
    if (L->cmd && now >= next_poll) {
      int64_t d = 0;
      if (poll_master(L, &d) == 0 && d > 0) {
        poll_ms = d / 8;
        if (poll_ms > POLL_MAX_MS) poll_ms = POLL_MAX_MS;
        if (poll_ms < POLL_MIN_MS) poll_ms = POLL_MIN_MS;
      }
      next_poll = clock_mono_ms() + poll_ms;
    }

    /* Sleep until an announcement, the stop, or the next thing due. */
    now = clock_mono_ms();
    int64_t until = L->cmd ? next_poll : L->next_cmd_ms;
    if (L->sub == NULL && L->next_sub_ms < until) until = L->next_sub_ms;
    if (L->sub) {
      int64_t due = L->ping_sent_ms ? L->ping_sent_ms + cfg->redis_timeout_ms : L->next_ping_ms;
      if (due < until) until = due;
    }
    struct pollfd p[2] = {{.fd = stop_fd, .events = POLLIN},
                          {.fd = L->sub ? L->sub->fd : -1, .events = POLLIN}};
    if (poll(p, 2, until > now ? (int)(until - now) : 0) < 0 && errno != EINTR) break;
    if (L->sub) {
      char why[200] = "closed";
      int lost = (p[1].revents & (POLLIN | POLLHUP | POLLERR)) && sub_read(L) < 0;
      if (lost && L->sub->err) snprintf(why, sizeof why, "%s", L->sub->errstr);
      if (!lost && sub_ping(L, clock_mono_ms(), why, sizeof why) < 0) lost = 1;
      if (lost) unsubscribe(L, why);
    }
  }
  if (L->sub) redisFree(L->sub);
  if (L->cmd) redisFree(L->cmd);
  L->sub = L->cmd = NULL;
  return NULL;
}

int sentinel_link_start(const config *c, sentinel_link_event_fn *on_event, char *err,
                        size_t errlen) {
  cfg = c;
  event_fn = on_event;
  stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) {
    snprintf(err, errlen, "eventfd: %s", strerror(errno));
    return -1;
  }
  pthread_mutex_lock(&mu);
  lease_update_locked(); /* no lease until a sentinel confirms one */
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < c->sentinel_count; i++) {
    links[i].i = i;
    snprintf(links[i].why, sizeof links[i].why, "has not answered yet");
    if (pthread_create(&links[i].thread, NULL, link_main, &links[i]) != 0) {
      snprintf(err, errlen, "cannot start a Sentinel link thread");
      return -1;
    }
    links[i].started = 1;
  }
  return 0;
}

void sentinel_link_stop(void) {
  if (stop_fd < 0) return;
  atomic_store(&stopping, 1);
  uint64_t one = 1;
  if (write(stop_fd, &one, sizeof one) < 0) { /* already signalled */ }
  for (int i = 0; i < cfg->sentinel_count; i++)
    if (links[i].started) pthread_join(links[i].thread, NULL);
  close(stop_fd);
  stop_fd = -1;
}
