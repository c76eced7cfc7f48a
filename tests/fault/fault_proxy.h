/* fault_proxy.h: a TCP proxy on loopback, run by a fault test, that plays
 * the network between two processes (a Redis replica and its primary, or
 * picketd and Redis) so the test can break it in ways a real network
 * breaks: cut everything at once, or silently lose the current
 * connections. */
#ifndef PICKET_FAULT_PROXY_H
#define PICKET_FAULT_PROXY_H

typedef struct fault_proxy fault_proxy;

/* Listens on a free 127.0.0.1 port and forwards each connection to
 * 127.0.0.1:upstream, from a thread of its own. Asserts on failure. */
fault_proxy *fault_proxy_start(int upstream);
int fault_proxy_port(const fault_proxy *p);
/* Cuts the cable: from now on nothing moves in either direction, on old or
 * new connections, and neither side is told. */
void fault_proxy_partition(fault_proxy *p);
/* Mends the cable after fault_proxy_partition: the connections open
 * across the cut are reset (both sides closed, what was held back is
 * lost, as a peer that timed out would find), new ones work. Returns once
 * done. */
void fault_proxy_heal(fault_proxy *p);
/* Loses every connection open now, the way a middlebox that lost its state
 * does: the upstream side is closed (the server sees the client go), the
 * client side stays open and silent forever (no data, no FIN, no RST; the
 * kernel still answers TCP keepalives). New connections work. Returns once
 * done. */
void fault_proxy_drop_silently(fault_proxy *p);
/* Stops the thread and closes every socket (both sides then see EOF).
 * NULL is fine. */
void fault_proxy_free(fault_proxy *p);

#endif
