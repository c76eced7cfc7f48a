/* lane.h: one connection of a store pipe to one node, and the queue of
 * what was appended to it (lane.c), for pipe.c. The contracts of the
 * functions are with their definitions in lane.c. */
#ifndef PICKETD_LANE_H
#define PICKETD_LANE_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "codec.h"
#include "conn.h"
#include "store.h"

/* A command the pipe writes for itself, in a lane's queue among the
 * calls: a WAIT written after a batch (with the calls it covers whose
 * script replies are in), a SCRIPT LOAD ahead of a call that met
 * NOSCRIPT, or the INFO of the policy check. */
typedef struct pipe_entry {
  store_op entry;              /* phase PHASE_WAIT, _LOAD or _INFO; entry.next is the queue */
  int script;                  /* PHASE_LOAD: which */
  store_op *held, *held_tail;  /* PHASE_WAIT: covered calls, in reply order (op->next) */
  struct pipe_entry *next;     /* PHASE_WAIT: the lane's next outstanding WAIT */
} pipe_entry;

typedef struct {
  conn k;
  store_op setup;        /* phase PHASE_SETUP: heads the queue while k's setup replies are due */
  store_op *head, *tail; /* appended, in the order their replies will come */
  store_op *unsent;      /* the first of them not yet written, or NULL */
  long unsent_n;         /* ...and how many calls from there */
  int unsent_guarded;    /* ...of which may write (grants, renewals): WAIT after them */
  pipe_entry *waits, *waits_tail; /* WAITs written, their replies not in: oldest first */
  int dirty;             /* commands appended that are not all written yet */
  unsigned long watched; /* k.starts when its socket joined the epoll set */
  uint32_t events;       /* ...and what the set watches it for */
} node_pipe;


void lane_watch(int ep, node_pipe *np);
void lane_queue(node_pipe *np, store_op *e);
int lane_append(node_pipe *np, store_op *e, op_command *cmd);
int lane_open(int ep, node_pipe *np, store_result *r);
void lane_drain(node_pipe *np, const store_result *why, store_status st);
void lane_fail(node_pipe *np, const store_result *why);
void lane_fail_transport(node_pipe *np);
void lane_check_primary(node_pipe *np);
void lane_write(int ep, node_pipe *np);
pipe_entry *lane_entry(node_pipe *np, int phase, int script);
void lane_setup_reply(node_pipe *np, redisReply *rep);
void lane_entry_reply(node_pipe *np, pipe_entry *w, redisReply *rep);

#endif
