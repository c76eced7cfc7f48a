/* hello.c: the smallest useful libpicket program, shown in docs/libpicket.md and
 * compiled by the tests against the *installed* library:
 *
 *   cc hello.c $(pkg-config --cflags --libs picket) -o hello
 *   ./hello http://127.0.0.1:7070 inventory-sync
 *
 * It takes the lock, keeps it renewed from a background thread while it
 * "works", checks its local deadline before each step, and releases it. */
#define _POSIX_C_SOURCE 200809L /* sleep */
#include <picket/picket.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
  const char *server = argc > 1 ? argv[1] : PICKET_DEFAULT_SERVER;
  const char *lock = argc > 2 ? argv[2] : "hello";
  picket_client *c = NULL;
  picket_lease *lease = NULL;
  picket_keeper *keeper = NULL;

  int err = picket_client_new(server, NULL, &c);
  if (err != 0) {
    fprintf(stderr, "client: %s\n", picket_strerror(err));
    return 1;
  }
  picket_acquire_opts opts = {.ttl_ms = 2000, .owner = "hello.c"};
  err = picket_acquire(c, lock, &opts, &lease);
  if (err != 0) {
    fprintf(stderr, "acquire: %s (%s)\n", picket_strerror(err), picket_client_error_message(c));
    picket_client_free(c);
    return err == PICKET_EHELD ? 3 : 1;
  }
  printf("lock %s fence %lld\n", picket_lease_lock(lease), (long long)picket_lease_fence(lease));

  /* Renew every ttl/3 in the background; poll picket_keeper_lost() or
   * pass a callback in picket_keeper_options to learn of a loss. */
  err = picket_keeper_start(c, lease, NULL, &keeper);
  for (int step = 0; err == 0 && step < 3; step++) {
    /* Before each write to storage: still ours by our own clock? Send the
     * fence with the write so the storage can refuse it if not. */
    if (!picket_lease_valid(lease) || picket_keeper_lost(keeper)) {
      fprintf(stderr, "lease lost: stop writing\n");
      err = PICKET_ELOST;
      break;
    }
    printf("step %d with fence %lld\n", step, (long long)picket_lease_fence(lease));
    sleep(1);
  }
  if (picket_keeper_stop(keeper) != 0) err = PICKET_ELOST;
  if (err == 0) err = picket_release(c, lease);
  printf("done: %s\n", picket_strerror(err));
  picket_lease_free(lease);
  picket_client_free(c);
  return err == 0 ? 0 : 1;
}
