/* conns.c: the client connections' own limits (see conns.h), so that a
 * flood of slow or many sockets from one client cannot starve the rest
 * (issue 16: 4,096 sockets from one host, each sending a header line
 * every 5 s, held every slot of --max-connections, and honest requests
 * hung). libmicrohttpd 0.9.75's idle timeout (--connection-timeout-s)
 * cannot help there: every byte resets it.
 *
 * The request deadline. A request starts at its first byte and must be
 * whole (line, headers, body) within --request-timeout-ms. The first byte
 * is seen by the loop's own epoll set (not libmicrohttpd's): each
 * connection's socket sits there edge-triggered (EPOLLIN|EPOLLET, added
 * once when the connection opens), so bytes arriving while the
 * connection has no request start one; bytes arriving during a request
 * are ignored. (It was EPOLLONESHOT, armed again after every request:
 * one epoll_ctl per request, about 4 % of picketd's CPU on the cycle.)
 * Bytes that arrived during the previous request, or that libmicrohttpd
 * has already read, wake nothing afterwards, so: a pipelined request
 * already in libmicrohttpd's buffer starts when libmicrohttpd reports its
 * request line; a new connection's first
 * request starts at the accept (connections come in bursts, and a burst's
 * first bytes may be read before the set is polled), restarted at its
 * first byte if that comes later, and left idle if no byte ever came
 * (TCP_INFO says how many have). Should libmicrohttpd win that race for a
 * later request's first byte, its next byte or its request line starts
 * it: a dribbler gains one interval at most. Once the
 * request is complete (the handler's last call) the deadline is off:
 * handling, a waiting acquire and the reply are not the client's to
 * hurry. An idle keep-alive connection has no request, so no deadline
 * (--connection-timeout-s closes it). Every loop has one timeout, so its
 * arriving requests, appended as they start, are in deadline order: each
 * pass looks at the head only. A connection past its deadline gets a bare
 * 408 when no byte of a reply can have gone out, then shutdown(): libmicrohttpd
 * sees the end of the stream, closes the socket (it owns it) and runs its
 * callbacks as for a client that left.
 *
 * The cap per address group. One table for all loops (a connection's
 * address says nothing of its loop) under a mutex, taken once per accept
 * and once per close of a capped group. The accept policy counts the
 * connection in; libmicrohttpd may still drop it before NOTIFY_STARTED
 * (out of memory), so the count is held for the loop's thread until its
 * conns_opened takes it, and given back by the next accept if none did.
 * A group is what one client can be expected to hold (issue 28: 16
 * loopback addresses at 256 each filled all 4,096 slots):
 * - an IPv4 address (IPv4-mapped IPv6 included) is its own group;
 * - IPv6 addresses are grouped by their first --ipv6-prefix-len bits
 *   (default 64). A /64 is the smallest block one site or host is given
 *   (RFC 6177; SLAAC needs it; a VPS or a phone gets a whole one), so a
 *   client that owns a /64 can pick endless addresses inside it, and a cap
 *   by whole address would not stop it. Where many honest hosts share one
 *   /64 (a cloud subnet), raise the prefix length (up to 128: whole
 *   addresses, the old behaviour) rather than lose the cap;
 * - all of loopback (127.0.0.0/8 and ::1) is one group: each of its
 *   addresses is this same host, and 127/8 has 16 million of them.
 * Under `auto` the loopback group is capped too, at half of
 * --max-connections: far above what a host's sidecars and workers open
 * (a connection or two each), so none is refused, yet a local flood
 * leaves the other half to other hosts (it used to be uncapped: one local
 * process could take every slot). Other groups get 256 (AUTO_PER_IP).
 *
 * Slots kept for authenticated clients (--reserved-auth-connections,
 * under --auth-file). A connection is accepted before any of its bytes,
 * so at accept nobody knows whether it will authenticate; it counts as
 * unauthenticated until api.c authenticates a request on it by its bearer
 * token (conns_authenticated, before the request is handled; once per
 * connection; an open endpoint such as /healthz authenticates nobody),
 * and from then on counts against neither of the bounds below but
 * against its token's (--max-connections-per-token, conns_token.c); one
 * its token has no room for stays unauthenticated, and is answered 429
 * and closed. Two bounds, one rule: when a new connection would put a bound
 * over, the oldest unauthenticated connection under that bound is closed
 * (shutdown(), no reply: as an idle timeout would) and the new one is let
 * in. Closing the oldest rather than refusing the newest is what lets a
 * client with a token in: its connection is the newest, and sends its
 * token in the next milliseconds; a flood has to open as many connections
 * as the bound in that time to push it out, and mostly evicts its own.
 * - Per loop: unauthenticated connections may hold the loop's share of
 *   --max-connections less its share of the reserve (rounded up).
 *   libmicrohttpd counts connections per daemon, and refuses one at its
 *   daemon's limit before our policy sees it, so a global bound would
 *   let a flood fill one loop and lock a token out of it. A loop's own
 *   connections are on its own thread: this one needs no lock.
 * - Per group, under --auth-file: the cap counts unauthenticated
 *   connections only, and a new one over it closes its group's oldest
 *   unauthenticated one (on any loop: shutdown() from this thread, under
 *   the table's mutex, on a socket its loop closes only after
 *   conns_closed has taken it off the group's list). Without
 *   --auth-file nobody can be told apart, and the newest is refused, so
 *   that connections already serving keep their slot.
 * A request on an unauthenticated connection under --auth-file can only
 * be refused 401 or be an open endpoint (/healthz, /readyz, the spec), so
 * closing one never strands a grant. Mutual TLS clients are not counted
 * as authenticated: only a bearer token is.
 *
 * Everything of one connection happens on its loop's thread (but a
 * group's eviction, which only calls shutdown() on it), so a loop's lists
 * need no lock. */
#include "conns.h"

#include <arpa/inet.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received (glibc's lacks it) */
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

#include "api_types.h"
#include "auth.h"
#include "conns_token.h"
#include "log.h"
#include "metrics.h"

/* --max-connections-per-ip auto, for groups other than loopback: far
 * above what one honest host opens (a pool per process, a few processes),
 * far below --max-connections' default of 4096. Loopback gets half of
 * --max-connections (cap_of). */
#define AUTO_PER_IP 256

/* The table's entries are counted, up to --max-connections plus one held
 * per loop between accept and conns_opened; buckets at most this many. */
#define MAX_BUCKETS (1u << 16)

/* A list of connections, oldest first, through one of their links. */
typedef struct conns_link {
  conns_client *prev, *next;
} conns_link;
typedef struct conns_list {
  conns_client *head, *tail;
  size_t link;            /* offsetof(conns_client, the link it goes through) */
} conns_list;

typedef struct ip_entry {
  unsigned char addr[16]; /* the group's key (group_key) */
  int count;              /* open connections, and one held by an accept */
  int dying;              /* of count: closed by an eviction, not yet by their loop */
  conns_list unauth;      /* under --auth-file: its unauthenticated connections, oldest first */
  struct ip_entry *next;  /* in its bucket */
} ip_entry;

enum { IDLE, ARRIVING, COMPLETE, CUT }; /* conns_client.state: where its request is */

struct conns_client {
  conns_loop *loop;
  struct MHD_Connection *mhd;
  int fd;
  int state;
  int from_accept;        /* ARRIVING since its accept, no byte seen yet */
  int64_t started_ms;     /* the arriving request's start: its first byte, or the accept */
  conns_client *prev, *next; /* in loop->head while ARRIVING */
  ip_entry *ip;           /* the group's count it holds, or NULL */
  unsigned char addr[16]; /* for the log */
  char group[CONNS_GROUP_TEXT_MAX]; /* its address group as text, made once (conns_peer) */
  /* Under --auth-file, until a request on it shows a valid token: */
  int unauth;                  /* in loop->unauth (this loop's thread only) */
  conns_link in_loop;
  int grouped;                 /* in ip->unauth (ips.mu) */
  conns_link in_group;
  atomic_int evicted;          /* shut down to make room (any thread) */
  conns_token_member tok;      /* its token's count, once authenticated (conns_token.c) */
};

struct conns_loop {
  int ep;
  conns_client *head, *tail; /* ARRIVING, oldest first: the next deadline is the head's */
  conns_list unauth;         /* unauthenticated, oldest first */
  int unauth_count;
};

static const config *cfg;
static int auth_on;       /* --auth-file: connections may authenticate */
static int loop_unauth_max; /* per loop, under a reserve; 0: no reserve */
static int ipv6_prefix;   /* --ipv6-prefix-len */

static struct {
  pthread_mutex_t mu;
  ip_entry **buckets;
  size_t mask;
  size_t entries, max_entries;
  uint64_t seed; /* so that a client cannot pick addresses that share a bucket */
} ips = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Counted by this thread's last accept and not yet taken by conns_opened. */
static __thread ip_entry *held;
/* The loop this thread runs (set by its first conns_opened: before that
 * it has no connection to close). */
static __thread conns_loop *this_loop;

/* ---- addresses ----------------------------------------------------------- */

/* What an IPv4 address mapped into IPv6 starts with. */
static const unsigned char v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* The 16-byte key of an IP address; 0 for another family. An IPv4 peer
 * of a dual-stack listener comes mapped, so both forms give one key. */
static int addr_key(const struct sockaddr *sa, unsigned char key[16]) {
  if (sa && sa->sa_family == AF_INET6) {
    memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    return 1;
  }
  if (sa && sa->sa_family == AF_INET) {
    memcpy(key, v4_prefix, 12);
    memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return 1;
  }
  return 0;
}

static int is_v4(const unsigned char key[16]) { return memcmp(key, v4_prefix, 12) == 0; }

/* 127.0.0.0/8 (plain or IPv4-mapped) and ::1. */
static int is_loopback(const unsigned char key[16]) {
  if (is_v4(key)) return key[12] == 127;
  return memcmp(key, &in6addr_loopback, 16) == 0;
}

static const char *addr_text(const unsigned char key[16], char out[INET6_ADDRSTRLEN]) {
  if (!inet_ntop(is_v4(key) ? AF_INET : AF_INET6, is_v4(key) ? key + 12 : key, out,
                 INET6_ADDRSTRLEN))
    snprintf(out, INET6_ADDRSTRLEN, "?");
  return out;
}

int conns_peer_loopback(const conns_client *c) { return c != NULL && is_loopback(c->addr); }

void conns_group_key(const unsigned char addr[16], int ipv6_prefix_len, unsigned char key[16]) {
  if (is_loopback(addr)) { /* 127.0.0.0/8 and ::1: one host, one group */
    memcpy(key, &in6addr_loopback, 16);
    return;
  }
  memcpy(key, addr, 16);
  if (is_v4(addr)) return;
  int bits = ipv6_prefix_len < 1 ? 1 : ipv6_prefix_len > 128 ? 128 : ipv6_prefix_len;
  if (bits % 8) key[bits / 8] &= (unsigned char)(0xff00 >> (bits % 8));
  for (int i = (bits + 7) / 8; i < 16; i++) key[i] = 0;
}

/* A group as text, for the log: "loopback", an IPv4 address, or an IPv6
 * prefix. */
static const char *group_text(const unsigned char key[16], char out[CONNS_GROUP_TEXT_MAX]) {
  char a[INET6_ADDRSTRLEN];
  if (memcmp(key, &in6addr_loopback, 16) == 0) snprintf(out, CONNS_GROUP_TEXT_MAX, "loopback");
  else if (is_v4(key)) snprintf(out, CONNS_GROUP_TEXT_MAX, "%s", addr_text(key, a));
  else snprintf(out, CONNS_GROUP_TEXT_MAX, "%s/%d", addr_text(key, a), ipv6_prefix);
  return out;
}

const char *conns_peer(const conns_client *c) { return c ? c->group : ""; }

/* How many connections the group may have; 0: no cap. */
static int cap_of(const unsigned char key[16]) {
  if (cfg->max_conns_per_ip != CONFIG_AUTO) return cfg->max_conns_per_ip;
  if (memcmp(key, &in6addr_loopback, 16) != 0) return AUTO_PER_IP;
  return cfg->max_connections > 1 ? cfg->max_connections / 2 : 1;
}

/* ---- the table of addresses (ips.mu held) ------------------------------- */

static ip_entry **bucket_of(const unsigned char key[16]) {
  uint64_t a, b;
  memcpy(&a, key, 8);
  memcpy(&b, key + 8, 8);
  uint64_t h = (a ^ ips.seed) * 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 32) ^ b) * 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 31;
  return &ips.buckets[h & ips.mask];
}

/* The address's entry, made if need be; NULL when the table is full. */
static ip_entry *ip_find(const unsigned char key[16]) {
  ip_entry **b = bucket_of(key);
  for (ip_entry *e = *b; e; e = e->next)
    if (memcmp(e->addr, key, 16) == 0) return e;
  if (ips.entries == ips.max_entries) return NULL;
  ip_entry *e = calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  memcpy(e->addr, key, 16);
  e->unauth.link = offsetof(conns_client, in_group);
  e->next = *b;
  *b = e;
  ips.entries++;
  return e;
}

/* Gives back one count of e (NULL is fine), of a connection an eviction
 * closed if `dying`; a group with none left leaves the table. */
static void ip_put(ip_entry *e, int dying) {
  if (e == NULL) return;
  pthread_mutex_lock(&ips.mu);
  e->dying -= dying;
  if (--e->count == 0) {
    for (ip_entry **p = bucket_of(e->addr); *p; p = &(*p)->next)
      if (*p == e) {
        *p = e->next;
        break;
      }
    free(e);
    ips.entries--;
  }
  pthread_mutex_unlock(&ips.mu);
}

static conns_link *link_of(const conns_list *l, conns_client *c) {
  return (conns_link *)((char *)c + l->link);
}

static void list_push(conns_list *l, conns_client *c) {
  link_of(l, c)->prev = l->tail;
  link_of(l, c)->next = NULL;
  if (l->tail) link_of(l, l->tail)->next = c;
  else l->head = c;
  l->tail = c;
}

static void list_drop(conns_list *l, conns_client *c) {
  conns_link *k = link_of(l, c);
  if (k->prev) link_of(l, k->prev)->next = k->next;
  else l->head = k->next;
  if (k->next) link_of(l, k->next)->prev = k->prev;
  else l->tail = k->prev;
  k->prev = k->next = NULL;
}

/* c off its group's list of unauthenticated connections, if on it. */
static void group_unlink(conns_client *c) {
  if (!c->grouped) return;
  list_drop(&c->ip->unauth, c);
  c->grouped = 0;
}

/* Closes c to make room (any thread; ips.mu held when c->ip is set, so
 * that c's loop cannot free it meanwhile). Its loop sees the end of the
 * stream and closes it as for a client that left. */
static void evict(conns_client *c) {
  atomic_store(&c->evicted, 1);
  if (c->ip) {
    group_unlink(c);
    c->ip->dying++;
  }
  shutdown(c->fd, SHUT_RDWR);
  metrics_inc(M_CONN_CUT_UNAUTHENTICATED);
}

int conns_init(const config *c) {
  cfg = c;
  auth_on = cfg->auth_file[0] != '\0';
  ipv6_prefix = cfg->ipv6_prefix_len;
  conns_token_init(cfg);
  loop_unauth_max = 0;
  int reserve = cfg->reserved_auth_conns == CONFIG_AUTO ? (auth_on ? cfg->max_connections / 8 : 0)
                                                         : cfg->reserved_auth_conns;
  if (auth_on && reserve > 0) {
    /* As http.c splits --max-connections: one daemon per loop, each with
     * its share (the first ones one more when it does not divide). */
    int loops = cfg->threads < cfg->max_connections ? cfg->threads : cfg->max_connections;
    int share = cfg->max_connections / loops, kept = (reserve + loops - 1) / loops;
    loop_unauth_max = share - kept > 0 ? share - kept : 1;
  }
  if (cfg->max_conns_per_ip == 0) return 0;
  size_t n = 1;
  while (n < (size_t)cfg->max_connections && n < MAX_BUCKETS) n *= 2;
  ips.buckets = calloc(n, sizeof *ips.buckets);
  if (ips.buckets == NULL) return -1;
  ips.mask = n - 1;
  ips.entries = 0;
  ips.max_entries = (size_t)cfg->max_connections + (size_t)cfg->threads;
  if (getrandom(&ips.seed, sizeof ips.seed, GRND_NONBLOCK) != sizeof ips.seed)
    ips.seed = (uint64_t)api_now_ms() ^ ((uint64_t)getpid() << 32);
  return 0;
}

void conns_free(void) {
  for (size_t i = 0; ips.buckets && i <= ips.mask; i++)
    for (ip_entry *e = ips.buckets[i], *next; e; e = next) {
      next = e->next;
      free(e);
    }
  free(ips.buckets);
  ips.buckets = NULL;
  conns_token_free();
}

/* At most one line a second, however many are refused. key: the group. */
static void log_refused(const unsigned char key[16], int cap) {
  static atomic_llong next_ms;
  static atomic_long refused;
  atomic_fetch_add(&refused, 1);
  long long now = api_now_ms(), due = atomic_load(&next_ms);
  if (now < due || !atomic_compare_exchange_strong(&next_ms, &due, now + 1000)) return;
  char g[CONNS_GROUP_TEXT_MAX];
  LOG(LOG_WARN, "connections over --max-connections-per-ip (%d) refused since the last such "
      "line: %ld, the last from %s", cap, atomic_exchange(&refused, 0), group_text(key, g));
}

/* This loop's oldest unauthenticated connection, closed to make room for
 * a new one (this loop's thread). */
static void evict_in_loop(conns_loop *cl) {
  for (conns_client *c = cl->unauth.head; c; c = c->in_loop.next) {
    if (c->state == CUT || atomic_load(&c->evicted)) continue; /* closing already */
    if (c->ip) pthread_mutex_lock(&ips.mu);
    evict(c);
    if (c->ip) pthread_mutex_unlock(&ips.mu);
    return;
  }
}

enum MHD_Result conns_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
  ip_put(held, 0); /* the last connection let in here never opened */
  held = NULL;
  /* The reserve: this loop's unauthenticated connections make room. A
   * connection the group cap refuses below was let in for nothing: the
   * bound is still kept, one connection too early. */
  if (loop_unauth_max && this_loop && this_loop->unauth_count >= loop_unauth_max)
    evict_in_loop(this_loop);
  unsigned char a[16], key[16];
  int cap = 0;
  if (ips.buckets && addr_key(addr, a)) {
    conns_group_key(a, ipv6_prefix, key);
    cap = cap_of(key);
  }
  if (cap == 0) return MHD_YES;
  pthread_mutex_lock(&ips.mu);
  ip_entry *e = ip_find(key);
  int ok = e && e->count - e->dying < cap;
  if (e && !ok && auth_on && e->unauth.head) { /* its oldest unauthenticated one makes room */
    evict(e->unauth.head);
    ok = 1;
  }
  if (ok) e->count++;
  pthread_mutex_unlock(&ips.mu);
  if (!ok) {
    metrics_inc(M_CONN_REFUSED_PER_IP);
    log_refused(key, cap);
    return MHD_NO;
  }
  held = e;
  return MHD_YES;
}

/* ---- request deadlines ---------------------------------------------------- */

conns_loop *conns_loop_new(int ep) {
  conns_loop *cl = calloc(1, sizeof *cl);
  if (cl) {
    cl->ep = ep;
    cl->unauth.link = offsetof(conns_client, in_loop);
  }
  return cl;
}

void conns_loop_free(conns_loop *cl) { free(cl); }

static void arm(conns_client *c) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = c};
  epoll_ctl(c->loop->ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void unlink_arriving(conns_client *c) {
  if (c->state != ARRIVING) return;
  c->from_accept = 0;
  conns_loop *cl = c->loop;
  if (c->prev) c->prev->next = c->next;
  else cl->head = c->next;
  if (c->next) c->next->prev = c->prev;
  else cl->tail = c->prev;
  c->prev = c->next = NULL;
}

/* The first byte of a request: its deadline runs from now. */
static void start(conns_client *c) {
  conns_loop *cl = c->loop;
  c->state = ARRIVING;
  c->started_ms = api_now_ms(); /* never earlier than the tail's: the list stays in order */
  c->prev = cl->tail;
  c->next = NULL;
  if (cl->tail) cl->tail->next = c;
  else cl->head = c;
  cl->tail = c;
}

/* Bytes the peer has sent on fd so far, read or not; -1 if unknown. */
static long long bytes_received(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  memset(&ti, 0, sizeof ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
      len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
    return -1;
  return (long long)ti.tcpi_bytes_received;
}

/* 1 when every byte c's peer has sent still waits in the socket: none has
 * reached libmicrohttpd. */
static int none_read(const conns_client *c) {
  int unread = 0;
  long long got = bytes_received(c->fd);
  return got >= 0 && ioctl(c->fd, FIONREAD, &unread) == 0 && unread >= got;
}

/* Under --auth-file: c joins its loop's and its group's lists of
 * unauthenticated connections, as their newest. */
static void unauth_join(conns_client *c) {
  c->unauth = 1;
  list_push(&c->loop->unauth, c);
  c->loop->unauth_count++;
  if (c->ip == NULL) return;
  pthread_mutex_lock(&ips.mu);
  c->grouped = 1;
  list_push(&c->ip->unauth, c);
  pthread_mutex_unlock(&ips.mu);
}

/* c off its loop's list (this loop's thread). */
static void unauth_leave(conns_client *c) {
  if (!c->unauth) return;
  list_drop(&c->loop->unauth, c);
  c->unauth = 0;
  c->loop->unauth_count--;
}

/* c and its group count off the table, under the lock its group's
 * evictions take (they read c->ip). */
static void group_leave(conns_client *c) {
  if (c->ip == NULL) return;
  pthread_mutex_lock(&ips.mu);
  group_unlink(c);
  ip_entry *ip = c->ip;
  c->ip = NULL;
  pthread_mutex_unlock(&ips.mu);
  ip_put(ip, atomic_load(&c->evicted));
}

int conns_authenticated(conns_client *c, auth_principal *who) {
  if (c == NULL || c->tok.token || conns_token_revoked(&c->tok)) return 0;
  if (!c->unauth) return 0; /* without --auth-file: nothing to count (api.c has no token then) */
  if (conns_token_join(&c->tok, who, c->fd) < 0) return -1; /* stays unauthenticated */
  unauth_leave(c);
  group_leave(c); /* an authenticated connection counts against its token, not its group */
  return 0;
}

int conns_revoked(const conns_client *c) { return c && conns_token_revoked(&c->tok); }

void conns_waiting(conns_client *c, int on) {
  if (c) atomic_store(&c->tok.waiting, on);
}

conns_client *conns_opened(conns_loop *cl, struct MHD_Connection *mc) {
  ip_entry *ip = held;
  held = NULL;
  this_loop = cl;
  const union MHD_ConnectionInfo *fi = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  const union MHD_ConnectionInfo *ai = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  conns_client *c = fi ? calloc(1, sizeof *c) : NULL;
  if (c == NULL) { /* untracked, it could dodge the limits: refuse it */
    ip_put(ip, 0);
    if (fi) shutdown(fi->connect_fd, SHUT_RDWR);
    return NULL;
  }
  c->loop = cl;
  c->mhd = mc;
  c->fd = fi->connect_fd;
  c->ip = ip;
  if (ai == NULL || !addr_key(ai->client_addr, c->addr)) memset(c->addr, 0, sizeof c->addr);
  unsigned char key[16];
  conns_group_key(c->addr, ipv6_prefix, key);
  group_text(key, c->group); /* once: every request's per-address limits key on it */
  if (auth_on) unauth_join(c);
  arm(c);
  /* The first request's clock starts at the accept: its first bytes often
   * come in a burst of connections that libmicrohttpd may read before this
   * loop's set is polled, and then no event would start it. A byte that
   * comes later restarts it (conns_readable); a connection that sends
   * nothing is idle, and its deadline finds so and lets it be. */
  start(c);
  c->from_accept = 1;
  return c;
}

void conns_closed(conns_client *c) {
  if (c == NULL) return;
  unlink_arriving(c);
  /* Out of the set before c is freed; the socket is still open here. */
  epoll_ctl(c->loop->ep, EPOLL_CTL_DEL, c->fd, NULL);
  unauth_leave(c);
  group_leave(c); /* after these two, no other thread can reach c */
  conns_token_leave(&c->tok);
  free(c);
}

void conns_readable(conns_client *c) {
  if (c == NULL) return;
  if (c->state == IDLE) {
    start(c);
  } else if (c->state == ARRIVING && c->from_accept && none_read(c)) {
    unlink_arriving(c); /* the first byte came after the accept: it starts the clock */
    start(c);
  }
  c->from_accept = 0;
}

void conns_request_started(conns_client *c) {
  if (c && (c->state == IDLE || c->state == COMPLETE)) start(c);
}

void conns_request_complete(conns_client *c) {
  if (c == NULL || c->state == CUT) return;
  unlink_arriving(c);
  c->state = COMPLETE;
}

void conns_request_finished(conns_client *c) {
  if (c == NULL || c->state == CUT) return;
  unlink_arriving(c);
  c->state = IDLE;
  /* Revoked while this request ran (a waiter's connection is not shut
   * down by the revocation): no further request is served on it. */
  if (conns_token_revoked(&c->tok)) shutdown(c->fd, SHUT_RDWR);
}

/* A 408 only while no byte of a reply can have been written: none is
 * queued (picketd's, or libmicrohttpd's own error), and no "100 Continue"
 * (libmicrohttpd sends one for "Expect" once the headers are in). Bytes of
 * ours inside one of those would garble it. No body: no endpoint was
 * reached, so there is no API error to give. */
static void answer_408(conns_client *c) {
  static const char reply[] =
      "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
  if (MHD_get_connection_info(c->mhd, MHD_CONNECTION_INFO_HTTP_STATUS) != NULL ||
      MHD_lookup_connection_value(c->mhd, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT) != NULL)
    return;
  ssize_t n = send(c->fd, reply, sizeof reply - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)n; /* best effort: the close follows either way */
}

static void cut(conns_client *c) {
  unlink_arriving(c);
  c->state = CUT;
  answer_408(c);
  shutdown(c->fd, SHUT_RDWR);
  metrics_inc(M_CONN_CUT_REQUEST_TIMEOUT);
  char a[INET6_ADDRSTRLEN];
  LOG(LOG_DEBUG, "closed a connection from %s: its request did not arrive within "
      "--request-timeout-ms (%lld ms)", addr_text(c->addr, a), (long long)cfg->request_timeout_ms);
}

void conns_expire(conns_loop *cl) {
  this_loop = cl;
  if (cl->head == NULL) return;
  int64_t now = api_now_ms();
  for (conns_client *c; (c = cl->head) && c->started_ms + cfg->request_timeout_ms <= now;) {
    if (c->from_accept && bytes_received(c->fd) == 0) {
      unlink_arriving(c); /* it never sent a byte: idle, not slow; still armed */
      c->state = IDLE;
    } else {
      cut(c);
    }
  }
}

int64_t conns_timeout_ms(const conns_loop *cl) {
  if (cl->head == NULL) return -1;
  int64_t left = cl->head->started_ms + cfg->request_timeout_ms - api_now_ms();
  return left > 0 ? left : 0;
}
