/* Unit tests of the Redis reply codec (server/store/redis/codec.c): each
 * call kind's script replies, as RESP bytes read by hiredis's own reader
 * (no server), parsed into the store_result and status the HTTP side gets;
 * the error replies sorted into store statuses; and a few commands built.
 * The codec links alone (with the node table and the lease count below
 * it): a change to a reply's layout is caught here in milliseconds. */
#include <check.h>

#include "harness.h"
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "config.h"
#include "redis.h"
#include "store.h"

/* The reply that RESP bytes `resp` make (one whole reply); the caller
 * frees it, or hands it to codec_parse, which does. */
static redisReply *reply_of(const char *resp) {
  redisReader *rd = redisReaderCreate();
  ck_assert_ptr_nonnull(rd);
  ck_assert_int_eq(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
  void *rep = NULL;
  ck_assert_int_eq(redisReaderGetReply(rd, &rep), REDIS_OK);
  ck_assert_msg(rep != NULL, "incomplete RESP: %s", resp);
  redisReaderFree(rd);
  return rep;
}

/* Parses `resp` as the reply to a fresh op of `kind` (its result in op->r). */
static store_status parse(store_op *op, store_op_kind kind, const char *resp) {
  memset(op, 0, sizeof *op);
  op->kind = kind;
  op->name = "jobs";
  redis_op_of(op)->slot = -1; /* routed outside Redis Cluster */
  return codec_parse(op, reply_of(resp));
}

/* The tamper element "" (the fence counter was sound). */
#define NOTAMPER "$0\r\n\r\n"

START_TEST(acquire) {
  store_op op;
  /* granted: {1, fence, created, tamper, ttl} */
  ck_assert_int_eq(parse(&op, STORE_OP_ACQUIRE,
                         "*5\r\n:1\r\n$2\r\n42\r\n:1\r\n" NOTAMPER ":30000\r\n"), STORE_OK);
  ck_assert_int_eq(op.r.fence, 42);
  ck_assert_int_eq(op.r.created, 1);
  ck_assert_int_eq(op.r.ttl_ms, 30000);
  /* a fence past 2^53 stays exact */
  ck_assert_int_eq(parse(&op, STORE_OP_ACQUIRE,
                         "*5\r\n:1\r\n$16\r\n9007199254740993\r\n:0\r\n" NOTAMPER ":100\r\n"),
                   STORE_OK);
  ck_assert_int_eq(op.r.fence, 9007199254740993LL);
  ck_assert_int_eq(op.r.created, 0);
  /* held: {0, retry, owner, tamper, 0} */
  ck_assert_int_eq(parse(&op, STORE_OP_ACQUIRE,
                         "*5\r\n:0\r\n:1234\r\n$5\r\nalice\r\n" NOTAMPER ":0\r\n"), STORE_HELD);
  ck_assert_int_eq(op.r.ttl_ms, 1234);
  ck_assert_str_eq(op.r.owner, "alice");
  /* held off by a lock-delay: {3, delay left, owner, tamper, 0} */
  ck_assert_int_eq(parse(&op, STORE_OP_ACQUIRE,
                         "*5\r\n:3\r\n:500\r\n$0\r\n\r\n" NOTAMPER ":0\r\n"), STORE_DELAYED);
  ck_assert_int_eq(op.r.ttl_ms, 500);
  ck_assert_str_eq(op.r.owner, "");
  /* the token holds its max_leases: {2, ...} */
  ck_assert_int_eq(parse(&op, STORE_OP_ACQUIRE,
                         "*5\r\n:2\r\n:0\r\n$0\r\n\r\n" NOTAMPER ":0\r\n"), STORE_EQUOTA);
  /* another shape is no grant */
  ck_assert_int_eq(parse(&op, STORE_OP_ACQUIRE, "*4\r\n:1\r\n$1\r\n1\r\n:1\r\n" NOTAMPER),
                   STORE_EREPLY);
  ck_assert_str_eq(op.r.err, "unexpected reply from the acquire script");
  ck_assert_int_eq(parse(&op, STORE_OP_ACQUIRE,
                         "*5\r\n:1\r\n$3\r\n-42\r\n:1\r\n" NOTAMPER ":1\r\n"), STORE_EREPLY);
}
END_TEST

START_TEST(renew_and_release) {
  store_op op;
  /* renewed: {fence, tamper, ttl, why, at} */
  ck_assert_int_eq(parse(&op, STORE_OP_RENEW,
                         "*5\r\n$2\r\n42\r\n" NOTAMPER ":20000\r\n$0\r\n\r\n:1700000000000\r\n"),
                   STORE_OK);
  ck_assert_int_eq(op.r.fence, 42);
  ck_assert_int_eq(op.r.ttl_ms, 20000);
  ck_assert_int_eq(op.r.at, 1700000000000LL);
  ck_assert_str_eq(op.r.why, "");
  /* lost, and why: {0, tamper, 0, why, at} */
  ck_assert_int_eq(parse(&op, STORE_OP_RENEW,
                         "*5\r\n:0\r\n" NOTAMPER ":0\r\n$27\r\nbroken by ops at 1700000000\r\n"
                         ":1699999999000\r\n"),
                   STORE_LOST);
  ck_assert_str_eq(op.r.why, "broken by ops at 1700000000");
  ck_assert_int_eq(op.r.at, 1699999999000LL);
  /* released: {1, tamper, "", at}; not held: {0, tamper, why} */
  ck_assert_int_eq(parse(&op, STORE_OP_RELEASE,
                         "*4\r\n:1\r\n" NOTAMPER "$0\r\n\r\n:1700000000000\r\n"), STORE_OK);
  ck_assert_int_eq(op.r.at, 1700000000000LL);
  ck_assert_int_eq(parse(&op, STORE_OP_RELEASE, "*3\r\n:0\r\n" NOTAMPER "$7\r\nexpired\r\n"),
                   STORE_LOST);
  ck_assert_str_eq(op.r.why, "expired");
  ck_assert_int_eq(parse(&op, STORE_OP_RELEASE, "*2\r\n:0\r\n" NOTAMPER), STORE_LOST);
  ck_assert_int_eq(parse(&op, STORE_OP_RELEASE, ":1\r\n"), STORE_EREPLY);
}
END_TEST

START_TEST(inspect) {
  store_op op;
  /* {fence, held, pttl, owner, delay, at, renewals, value} */
  ck_assert_int_eq(parse(&op, STORE_OP_INSPECT,
                         "*8\r\n$2\r\n42\r\n:1\r\n:2500\r\n$5\r\nalice\r\n:0\r\n"
                         ":1700000000000\r\n:3\r\n$6\r\nleader\r\n"),
                   STORE_OK);
  ck_assert_int_eq(op.r.fence, 42);
  ck_assert_int_eq(op.r.held, 1);
  ck_assert_int_eq(op.r.ttl_ms, 2500);
  ck_assert_str_eq(op.r.owner, "alice");
  ck_assert_int_eq(op.r.at, 1700000000000LL);
  ck_assert_int_eq(op.r.renewals, 3);
  ck_assert_ptr_nonnull(op.r.value);
  ck_assert_str_eq(op.r.value, "leader");
  store_result_clear(&op.r);
  ck_assert_ptr_null(op.r.value);
  /* free, never granted, a lock-delay running: no TTL, no value */
  ck_assert_int_eq(parse(&op, STORE_OP_INSPECT,
                         "*8\r\n$1\r\n0\r\n:0\r\n:-2\r\n$0\r\n\r\n:700\r\n:0\r\n:0\r\n$1\r\nx\r\n"),
                   STORE_OK);
  ck_assert_int_eq(op.r.fence, 0);
  ck_assert_int_eq(op.r.held, 0);
  ck_assert_int_eq(op.r.ttl_ms, 0);
  ck_assert_int_eq(op.r.delay_ms, 700);
  ck_assert_ptr_null(op.r.value);
  /* a semaphore: {limit, live, then slot, fence, owner, ttl, delay per permit} */
  ck_assert_int_eq(parse(&op, STORE_OP_SEM_INSPECT,
                         "*12\r\n:3\r\n:2\r\n"
                         ":0\r\n$1\r\n7\r\n$3\r\nbob\r\n:1000\r\n:0\r\n"
                         ":2\r\n$1\r\n9\r\n$0\r\n\r\n:0\r\n:250\r\n"),
                   STORE_OK);
  ck_assert_int_eq(op.r.limit, 3);
  ck_assert_int_eq(op.r.live, 2);
  ck_assert_int_eq(op.r.npermits, 2);
  ck_assert_int_eq(op.r.permits[0].permit, 0);
  ck_assert_int_eq(op.r.permits[0].fence, 7);
  ck_assert_str_eq(op.r.permits[0].owner, "bob");
  ck_assert_int_eq(op.r.permits[0].ttl_ms, 1000);
  ck_assert_int_eq(op.r.permits[1].permit, 2);
  ck_assert_int_eq(op.r.permits[1].delay_ms, 250);
  store_result_clear(&op.r);
  ck_assert_ptr_null(op.r.permits);
  /* a permit of another shape fails the whole reply, and frees what it read */
  ck_assert_int_eq(parse(&op, STORE_OP_SEM_INSPECT,
                         "*7\r\n:3\r\n:1\r\n:0\r\n:7\r\n$3\r\nbob\r\n:1000\r\n:0\r\n"),
                   STORE_EREPLY);
  ck_assert_ptr_null(op.r.permits);
  ck_assert_int_eq(op.r.npermits, 0);
  /* a read/write lock: {last, writer {fence, owner, ttl, delay}, readers, waiting,
   * then fence, owner, ttl per listed reader} */
  ck_assert_int_eq(parse(&op, STORE_OP_RW_INSPECT,
                         "*7\r\n$2\r\n11\r\n*4\r\n$2\r\n11\r\n$1\r\nw\r\n:900\r\n:0\r\n:0\r\n:1\r\n"
                         "$1\r\n8\r\n$1\r\nr\r\n:400\r\n"),
                   STORE_OK);
  ck_assert_int_eq(op.r.fence, 11);
  ck_assert_int_eq(op.r.held, 1);
  ck_assert_str_eq(op.r.owner, "w");
  ck_assert_int_eq(op.r.ttl_ms, 900);
  ck_assert_int_eq(op.r.waiting, 1);
  ck_assert_int_eq(op.r.npermits, 1);
  ck_assert_int_eq(op.r.permits[0].permit, -1);
  ck_assert_int_eq(op.r.permits[0].fence, 8);
  store_result_clear(&op.r);
}
END_TEST

START_TEST(semaphore_and_rwlock) {
  store_op op;
  /* a permit granted: the acquire head, then its slot */
  ck_assert_int_eq(parse(&op, STORE_OP_SEM_ACQUIRE,
                         "*6\r\n:1\r\n$1\r\n5\r\n:1\r\n" NOTAMPER ":1000\r\n:2\r\n"), STORE_OK);
  ck_assert_int_eq(op.r.fence, 5);
  ck_assert_int_eq(op.r.permit, 2);
  /* the live permits use another limit: {4, limit, ...} */
  ck_assert_int_eq(parse(&op, STORE_OP_SEM_ACQUIRE,
                         "*6\r\n:4\r\n:5\r\n$0\r\n\r\n" NOTAMPER ":0\r\n:-1\r\n"), STORE_ELIMIT);
  ck_assert_int_eq(op.r.limit, 5);
  /* a permit renewed: the renew head, then its slot */
  ck_assert_int_eq(parse(&op, STORE_OP_SEM_RENEW, "*4\r\n$1\r\n5\r\n" NOTAMPER ":900\r\n:2\r\n"),
                   STORE_OK);
  ck_assert_int_eq(op.r.permit, 2);
  ck_assert_int_eq(op.r.ttl_ms, 900);
  /* a read/write lock held: the acquire head, then why not (held_by) */
  const struct {
    const char *mode;
    int held_by;
  } modes[] = {{"write", 0}, {"read", 1}, {"waiting", 2}, {"full", 3}};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    char resp[200];
    snprintf(resp, sizeof resp, "*6\r\n:0\r\n:800\r\n$5\r\nalice\r\n" NOTAMPER ":0\r\n$%zu\r\n%s\r\n",
             strlen(modes[i].mode), modes[i].mode);
    ck_assert_int_eq(parse(&op, STORE_OP_RW_ACQUIRE, resp), STORE_HELD);
    ck_assert_int_eq(op.r.held_by, modes[i].held_by);
    ck_assert_int_eq(op.r.ttl_ms, 800);
  }
  /* granted a read lease */
  ck_assert_int_eq(parse(&op, STORE_OP_RW_ACQUIRE,
                         "*6\r\n:1\r\n$1\r\n6\r\n:1\r\n" NOTAMPER ":1000\r\n$4\r\nread\r\n"),
                   STORE_OK);
  ck_assert_int_eq(op.r.held_by, 1);
  ck_assert_int_eq(op.r.fence, 6);
  /* a forget is a release's reply */
  ck_assert_int_eq(parse(&op, STORE_OP_RW_FORGET, "*2\r\n:1\r\n" NOTAMPER), STORE_OK);
}
END_TEST

START_TEST(list_and_break) {
  store_op op;
  /* {next, then kind, name, holders, fence, owner, ttl, at, renewals, limit per entry} */
  ck_assert_int_eq(parse(&op, STORE_OP_LIST,
                         "*19\r\n$6\r\njobs l\r\n"
                         "$1\r\nl\r\n$4\r\njobs\r\n:1\r\n$2\r\n12\r\n$5\r\nalice\r\n:900\r\n"
                         ":1700000000000\r\n:2\r\n:0\r\n"
                         "$1\r\ns\r\n$5\r\npool1\r\n:2\r\n$1\r\n0\r\n$0\r\n\r\n:0\r\n:0\r\n:0\r\n"
                         ":4\r\n"),
                   STORE_OK);
  ck_assert_str_eq(op.r.next, "jobs l");
  ck_assert_int_eq(op.r.nentries, 2);
  ck_assert_int_eq(op.r.entries[0].kind, 'l');
  ck_assert_str_eq(op.r.entries[0].name, "jobs");
  ck_assert_int_eq(op.r.entries[0].fence, 12);
  ck_assert_str_eq(op.r.entries[0].owner, "alice");
  ck_assert_int_eq(op.r.entries[0].ttl_ms, 900);
  ck_assert_int_eq(op.r.entries[0].renewals, 2);
  ck_assert_int_eq(op.r.entries[1].kind, 's');
  ck_assert_int_eq(op.r.entries[1].holders, 2);
  ck_assert_int_eq(op.r.entries[1].limit, 4);
  ck_assert_int_eq(op.r.entries[1].ttl_ms, 1); /* an expiring entry still shows 1 ms */
  store_result_clear(&op.r);
  /* the last page, empty */
  ck_assert_int_eq(parse(&op, STORE_OP_LIST, "*1\r\n$0\r\n\r\n"), STORE_OK);
  ck_assert_str_eq(op.r.next, "");
  ck_assert_int_eq(op.r.nentries, 0);
  /* an entry cut short is no page */
  ck_assert_int_eq(parse(&op, STORE_OP_LIST, "*3\r\n$0\r\n\r\n$1\r\nl\r\n$4\r\njobs\r\n"),
                   STORE_EREPLY);
  /* break: {broken, fence, owner, tamper, at, token} */
  ck_assert_int_eq(parse(&op, STORE_OP_BREAK,
                         "*6\r\n:1\r\n$2\r\n13\r\n$5\r\nalice\r\n" NOTAMPER
                         ":1700000000000\r\n$5\r\nteam1\r\n"),
                   STORE_OK);
  ck_assert_int_eq(op.r.held, 1);
  ck_assert_int_eq(op.r.fence, 13);
  ck_assert_str_eq(op.r.owner, "alice");
  ck_assert_str_eq(op.r.token, "team1");
  ck_assert_int_eq(op.r.at, 1700000000000LL);
  /* the watch's reply is a number */
  ck_assert_int_eq(parse(&op, STORE_OP_WATCH, ":1\r\n"), STORE_OK);
  ck_assert_int_eq(parse(&op, STORE_OP_WATCH, "$2\r\nOK\r\n"), STORE_EREPLY);
}
END_TEST

START_TEST(lease_count_phases) {
  store_op op = {.kind = STORE_OP_ACQUIRE, .name = "jobs", .token = "team1", .max_leases = 2};
  /* quota.lua's take: 0 the token is full, 1 counted in, 2 already counted */
  const struct {
    const char *resp;
    store_status st;
    int added;
  } takes[] = {{":0\r\n", STORE_EQUOTA, 0}, {":1\r\n", STORE_OK, 1}, {":2\r\n", STORE_OK, 0},
               {":3\r\n", STORE_EREPLY, 0}};
  for (size_t i = 0; i < sizeof takes / sizeof takes[0]; i++) {
    memset(&op.r, 0, sizeof op.r);
    redis_op_of(&op)->phase = PHASE_TAKE;
    redis_op_of(&op)->quota_added = 0;
    ck_assert_int_eq(codec_parse(&op, reply_of(takes[i].resp)), takes[i].st);
    ck_assert_int_eq(redis_op_of(&op)->quota_added, takes[i].added);
  }
  ck_assert_str_eq(op.r.err, "unexpected reply from the quota script");
}
END_TEST

START_TEST(error_replies) {
  const struct {
    const char *resp;
    store_status st;
    const char *err; /* the start of r.err */
  } cases[] = {
      {"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", STORE_EREPLY,
       "Redis error: WRONGTYPE"},
      {"-OOM command not allowed when used memory > 'maxmemory'.\r\n", STORE_EFULL,
       "Redis is at its maxmemory"},
      {"-NOSCRIPT No matching script. Please use EVAL.\r\n", STORE_EREPLY, "Redis error: NOSCRIPT"},
      {"-LOADING Redis is loading the dataset in memory\r\n", STORE_EUNAVAIL,
       "Redis cannot serve now: LOADING"},
      {"-READONLY You can't write against a read only replica.\r\n", STORE_EUNAVAIL,
       "Redis cannot serve now: READONLY"},
      {"-MASTERDOWN Link with MASTER is down\r\n", STORE_EUNAVAIL, "Redis cannot serve now"},
      {"-BUSY Redis is busy running a script\r\n", STORE_EUNAVAIL, "Redis cannot serve now"},
      {"-CLUSTERDOWN The cluster is down\r\n", STORE_EUNAVAIL, "Redis cannot serve now"},
      /* outside --redis-cluster a MOVED is a misconfiguration, not a redirection */
      {"-MOVED 3999 10.0.0.2:6381\r\n", STORE_EMISCONF, "Redis is a Redis Cluster node"},
      {"-CROSSSLOT Keys in request don't hash to the same slot\r\n", STORE_EMISCONF,
       "Redis is a Redis Cluster node"},
      {"-PICKET_COUNTER the fence counter of jobs is at its end script: 1234, on "
       "@user_script:9.\r\n",
       STORE_EREPLY, "the fence counter of jobs is at its end"},
      {"-PICKET_TAMPERED the fence counter of jobs holds 'x'\r\n", STORE_ETAMPERED,
       "the fence counter of jobs holds 'x'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    store_op op;
    ck_assert_msg(parse(&op, STORE_OP_ACQUIRE, cases[i].resp) == cases[i].st, "%s",
                  cases[i].resp);
    ck_assert_msg(strncmp(op.r.err, cases[i].err, strlen(cases[i].err)) == 0, "%s: r.err '%s'",
                  cases[i].resp, op.r.err);
    ck_assert_ptr_null(strstr(op.r.err, "script:")); /* Redis's script location is dropped */
  }
  redisReply *rep = reply_of("-NOSCRIPT No matching script.\r\n");
  ck_assert(codec_is_noscript(rep));
  freeReplyObject(rep);
  rep = reply_of("-ERR unknown command\r\n");
  ck_assert(!codec_is_noscript(rep));
  freeReplyObject(rep);
  /* a slot is named when a shard is down */
  store_op op = {.kind = STORE_OP_RENEW, .name = "jobs"};
  redis_op_of(&op)->slot = 3999;
  ck_assert_int_eq(codec_parse(&op, reply_of("-CLUSTERDOWN Hash slot not served\r\n")),
                   STORE_EUNAVAIL);
  ck_assert_str_eq(op.r.err,
                   "Redis Cluster slot 3999: Redis cannot serve now: CLUSTERDOWN Hash slot "
                   "not served");
}
END_TEST

START_TEST(commands) {
  static config cfg;
  snprintf(cfg.key_prefix, sizeof cfg.key_prefix, "picket:");
  cfg.fence_floor = FENCE_FLOOR_CLOCK;
  cfg.fence_idle_ttl_ms = 86400000;
  codec_init(&cfg);
  op_command cmd;
  /* acquire: EVALSHA sha 3 lease fence index; lease ttl owner floor idle delay cap max name token */
  store_op op = {.kind = STORE_OP_ACQUIRE, .name = "jobs", .lease = "L1", .owner = "alice",
                 .ttl_ms = 30000, .lock_delay_ms = 50};
  ck_assert_int_eq(codec_build(&op, &cmd), 0);
  ck_assert_int_eq(cmd.argc, 16);
  ck_assert_str_eq(cmd.argv[0], "EVALSHA");
  ck_assert_str_eq(cmd.argv[2], "3");
  ck_assert_str_eq(cmd.argv[3], cmd.lease_key); /* the key the call is routed by */
  ck_assert_ptr_nonnull(strstr(cmd.lease_key, "jobs"));
  ck_assert_str_eq(cmd.argv[5], "picket:index");
  ck_assert_str_eq(cmd.argv[6], "L1");
  ck_assert_str_eq(cmd.argv[7], "30000");
  ck_assert_str_eq(cmd.argv[8], "alice");
  ck_assert_str_eq(cmd.argv[9], "clock");
  ck_assert_str_eq(cmd.argv[10], "86400000");
  ck_assert_str_eq(cmd.argv[11], "50");
  /* with a token's count, on one Redis: the token's key is the fourth */
  op.token = "team1", op.max_leases = 3;
  ck_assert_int_eq(codec_build(&op, &cmd), 0);
  ck_assert_str_eq(cmd.argv[2], "4");
  ck_assert_str_eq(cmd.argv[6], cmd.token_key);
  ck_assert_str_eq(cmd.argv[14], "3");
  /* a name too long for a key */
  char name[PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 32];
  memset(name, 'a', sizeof name - 1), name[sizeof name - 1] = '\0';
  store_op long_name = {.kind = STORE_OP_INSPECT, .name = name};
  ck_assert_int_eq(codec_build(&long_name, &cmd), -1);
  /* each kind runs its script; a count's phases run quota.lua */
  ck_assert_int_eq(codec_script_of(&(store_op){.kind = STORE_OP_RW_FORGET}), SCRIPT_RW);
  ck_assert_int_eq(codec_script_of(&(store_op){.kind = STORE_OP_WATCH}), SCRIPT_WATCH);
  store_op take = {.kind = STORE_OP_ACQUIRE};
  redis_op_of(&take)->phase = PHASE_TAKE;
  ck_assert_int_eq(codec_script_of(&take), SCRIPT_QUOTA);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codec");
  TCase *tc = tcase_create("codec");
  tcase_add_test(tc, acquire);
  tcase_add_test(tc, renew_and_release);
  tcase_add_test(tc, inspect);
  tcase_add_test(tc, semaphore_and_rwlock);
  tcase_add_test(tc, list_and_break);
  tcase_add_test(tc, lease_count_phases);
  tcase_add_test(tc, error_replies);
  tcase_add_test(tc, commands);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
