/* test_client_gone.c: a client that gives up on its acquire before
 * picketd answers (issue 6).
 *
 * Clients time out. When picketd is slow to answer (it was paused, or
 * Redis was slow), the client closes its connection and goes away. If
 * picketd grants the lock anyway, nobody holds the lease and nobody can
 * release it: the lock is blocked for the full TTL. picketd already
 * avoids this for waiting acquires (it checks the client before granting)
 * and for replies that fail to send. Here the client's whole request is
 * in the socket when it leaves, so the reply is still "sent" (into a
 * half-closed socket) and nothing is undone unless picketd checks.
 *
 * paused_picketd: picketd SIGSTOPped, a client sends an acquire (30 s TTL)
 *   and closes; picketd resumed. The lock must be free.
 * client_leaves_during_slow_redis: Redis in DEBUG SLEEP 1 s (picketd's
 *   Redis timeout is longer, so picketd waits); the client sends an
 *   acquire, waits 200 ms and closes. The lock must be free once Redis is
 *   back. */
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include "fault_util.h"

/* Sends a whole acquire request for `name` (TTL 30 s) to picketd on `port`
 * over a fresh connection and returns the socket, still open. */
static int send_acquire(int port, const char *name) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char *body = "{\"ttl_ms\":30000}";
  char req[512];
  int n = snprintf(req, sizeof req,
                   "POST /v1/locks/%s/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Content-Length: %zu\r\n\r\n%s",
                   name, strlen(body), body);
  ck_assert_int_eq(write(fd, req, (size_t)n), n);
  return fd;
}

/* The lock must be free: polled for 5 s (its TTL is 30 s), or until the
 * acquire was granted (the fence counter moved) and undone. picketd may
 * also drop the request unanswered, having seen the client leave before
 * it granted: then the fence stays 0. A new client must get the lock. */
static void expect_free(const char *url, const char *name) {
  fault_call c;
  int64_t t0 = harness_now_ms();
  for (;;) {
    ck_assert_int_eq(fault_lock(url, name, NULL, NULL, &c), 200);
    if ((c.fence >= 1 && !c.held) || harness_now_ms() - t0 >= 5000 * harness_time_scale()) break;
    harness_sleep_ms(50);
  }
  printf("%s after the client left: held=%d fence=%lld (%lld ms)\n", name, c.held,
         (long long)c.fence, (long long)(harness_now_ms() - t0));
  ck_assert_msg(c.held == 0, "%s is held by a grant whose client is gone (fence %lld): blocked "
                "for the whole TTL", name, (long long)c.fence);
  ck_assert_int_eq(fault_acquire(url, name, 1000, NULL, &c), 200);
}

START_TEST(paused_picketd) {
  harness_redis *R = harness_redis_start(NULL);
  ck_assert_ptr_nonnull(R);
  harness_picketd *P = harness_picketd_start(harness_redis_url(R), NULL);
  ck_assert_ptr_nonnull(P);
  fault_call c;
  ck_assert_int_eq(fault_lock(harness_picketd_url(P), "gone", NULL, NULL, &c), 200);
  fault_stop_process(harness_picketd_pid(P));
  int fd = send_acquire(harness_picketd_port(P), "gone"); /* the kernel accepts it */
  harness_sleep_ms(200);
  close(fd); /* the client's timeout: it leaves */
  kill(harness_picketd_pid(P), SIGCONT);
  expect_free(harness_picketd_url(P), "gone");
  harness_picketd_free(P);
  harness_redis_free(R);
}
END_TEST

START_TEST(client_leaves_during_slow_redis) {
  harness_redis *R = harness_redis_start(NULL);
  ck_assert_ptr_nonnull(R);
  const char *args[] = {"--redis-timeout-ms", "5000", "--threads", "2", NULL};
  harness_picketd *P = harness_picketd_start(harness_redis_url(R), args);
  ck_assert_ptr_nonnull(P);
  fault_call c;
  ck_assert_int_eq(fault_lock(harness_picketd_url(P), "gone2", NULL, NULL, &c), 200);
  redisContext *sleeper = harness_redis_connect(R);
  ck_assert_ptr_nonnull(sleeper);
  struct timeval tv = {10, 0};
  redisSetTimeout(sleeper, tv);
  ck_assert_int_eq(redisAppendCommand(sleeper, "DEBUG SLEEP 1"), REDIS_OK);
  int done = 0;
  while (!done) ck_assert_int_eq(redisBufferWrite(sleeper, &done), REDIS_OK);
  harness_sleep_ms(50);
  int fd = send_acquire(harness_picketd_port(P), "gone2");
  harness_sleep_ms(200);
  close(fd);
  redisReply *x = NULL;
  ck_assert_int_eq(redisGetReply(sleeper, (void **)&x), REDIS_OK);
  freeReplyObject(x);
  redisFree(sleeper);
  expect_free(harness_picketd_url(P), "gone2");
  harness_picketd_free(P);
  harness_redis_free(R);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const TTest *tests[] = {paused_picketd, client_leaves_during_slow_redis};
  return fault_run("fault_client_gone", tests, 2);
}
