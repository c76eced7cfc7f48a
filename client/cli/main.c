/* main.c: the `picket` command: flag parsing, help, and the one-shot
 * commands (acquire, renew, release, status) on libpicket, for locks,
 * with --semaphore for counting semaphores' permits, and with --read,
 * --write or --rwlock for read/write locks' leases. `run` lives in
 * run.c, `token` in token.c, the operators' ls, show and break in ops.c,
 * `watch` in watch.c, the election commands (elect, leader, proclaim,
 * resign) in elect.c.
 * Output is one JSON object per command on stdout (or shell assignments
 * with acquire --shell; a table or lines for people from ls, show, break
 * and watch without --json); errors are one line on stderr, with an exit code
 * from cli.h that scripts can act on.
 *
 * Secrets never come from argv, which any user can read in ps: the bearer
 * token only from a file (--token-file) or $PICKET_TOKEN, and a lease id
 * may come from --lease-file or $PICKET_LEASE instead of --lease. Neither
 * is ever printed, in an error or anywhere else. */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "picket_proto.h"

static const char usage_text[] =
    "usage: picket [--server URL] [--cacert FILE] [--cert FILE --key FILE] [--token-file FILE]\n"
    "              COMMAND NAME [FLAGS]\n"
    "\n"
    "A client of picketd, the lock service whose every grant carries a fencing token.\n"
    "\n"
    "commands:\n"
    "  acquire NAME [--ttl 30s] [--wait 0s] [--owner X] [--lease ID] [--shell]\n"
    "               [--lock-delay D] [--max-hold D] [--semaphore --limit N | --read | --write]\n"
    "      take the lock; print the grant as JSON {lock, lease, fence, ttl_ms, owner},\n"
    "      or with --shell as PICKET_LOCK=, PICKET_FENCE=, PICKET_LEASE= lines\n"
    "  renew NAME (--lease ID | --lease-file FILE) [--ttl 30s] [--semaphore | --rwlock]\n"
    "      extend a lease; print {lock, fence, ttl_ms}\n"
    "  release NAME (--lease ID | --lease-file FILE) [--semaphore | --rwlock]\n"
    "      give the lock back; print {lock, released}\n"
    "  status NAME [--semaphore | --rwlock]\n"
    "      print {lock, held, fence, ttl_ms, owner} (never the lease id)\n"
    "  ls [PREFIX] [--limit N] [--all] [--json]\n"
    "      the held locks, semaphores and rwlocks (all, or those whose names start\n"
    "      with PREFIX) as a table: KIND NAME HOLDERS OWNER FENCE TTL AGE RENEWALS\n"
    "      WAITERS; --limit N names (default 100), --all every one; --json: the\n"
    "      listing's pages, one JSON object {locks, cursor} a line. Needs the token's\n"
    "      list verb under picketd's --auth-file\n"
    "  show NAME [--json]\n"
    "      a lock for people: held, owner, fence, TTL, when acquired (age and UTC\n"
    "      time), renewals, waiters; --json: {lock, held, fence, ttl_ms, owner,\n"
    "      acquired_at, renewals, waiters}\n"
    "  watch NAME [--json] [--count N]\n"
    "      print the lock's events as they happen, one line each: the time (UTC), the\n"
    "      event (state first, then granted, renewed, released, expired, broken) and\n"
    "      its fence, owner, ttl_ms, next_fence, by; --json: {\"event\": TYPE, \"data\":\n"
    "      {...}} a line, data as picketd sends it. Runs until SIGINT or SIGTERM (exit\n"
    "      0) or --count N events; a dropped stream is opened again (a new state line\n"
    "      says where the lock stands). Needs the read verb under --auth-file\n"
    "  break NAME [--yes] [--json]\n"
    "      end the lock's lease now and move its fence past it (the holder's writes\n"
    "      to fenced storage are refused, its renew and release exit 76); print\n"
    "      whether a lease was broken, its owner and the new fence (--json: {lock,\n"
    "      broken, fence, owner}). Asks first on a terminal; needs --yes when stdin\n"
    "      is not one. Needs the admin verb under --auth-file; without it picketd\n"
    "      lets only loopback callers break\n"
    "  run NAME [--ttl 30s] [--wait 0s] [--grace 5s] [--owner X] [--lock-delay D]\n"
    "      [--max-hold D] [--semaphore --limit N | --read | --write] -- CMD [ARGS...]\n"
    "      take the lock, run CMD in its own process group with PICKET_LOCK,\n"
    "      PICKET_FENCE, PICKET_LEASE and PICKET_DEADLINE_MS set, renew every ttl/3\n"
    "      while it runs, forward SIGINT, SIGTERM, SIGHUP and SIGQUIT to it, release\n"
    "      when it exits and exit with its status (128+N if killed by signal N).\n"
    "      If the lease is lost (--max-hold reached included; a break or another's\n"
    "      grant is seen at once in the lock's events): SIGTERM the child's group,\n"
    "      SIGKILL it after --grace, exit 76.\n"
    "  With --semaphore, NAME is a counting semaphore's and the command works on one\n"
    "      of its permits: acquire and run take one of its --limit N permits (the\n"
    "      grant adds semaphore, permit, limit and fence_lock; --shell and run's CMD\n"
    "      get PICKET_LOCK=NAME:permit:I, the lock name to check its fence under, and\n"
    "      PICKET_PERMIT and PICKET_SEMAPHORE); renew and release name the permit's\n"
    "      lease; status prints {semaphore, limit, held, permits, waiters}.\n"
    "  With --read or --write (acquire, run) or --rwlock (renew, release, status),\n"
    "      NAME is a read/write lock's: many readers or one writer, and a writer that\n"
    "      waits keeps new readers out. acquire and run take a read or write lease (the\n"
    "      grant adds rwlock, mode and fence_lock; --shell and run's CMD get\n"
    "      PICKET_LOCK=NAME:rw, the lock name to check its fence under, PICKET_MODE=read\n"
    "      or write and PICKET_RWLOCK=NAME); renew and release name the lease; status\n"
    "      prints {rwlock, fence, fence_lock, writer, readers, read_leases,\n"
    "      writers_waiting, waiters}.\n"
    "  elect NAME [--value V] [--ttl 30s] [--wait D] [--grace 5s] [--owner X] -- CMD [ARGS...]\n"
    "      campaign in election NAME, waiting in line (without --wait: for as long as it\n"
    "      takes), and once leader run CMD as run does, with PICKET_ELECTION=NAME,\n"
    "      PICKET_TERM=TERM, PICKET_LOCK=NAME and PICKET_FENCE=TERM (check writes under\n"
    "      the election's name with its term), PICKET_LEASE and PICKET_DEADLINE_MS; resign\n"
    "      when CMD exits (or on SIGTERM/SIGINT, once CMD has exited), exit with its\n"
    "      status; leadership lost: stop CMD as run does, exit 76; --wait ran out: 75\n"
    "  leader NAME\n"
    "      print {election, leader: null or {term, value, owner, since, ttl_ms}, term,\n"
    "      candidates} (never the lease id)\n"
    "  proclaim NAME --value V (--lease ID | --lease-file FILE) [--ttl D]\n"
    "      a leader's new value (\"\": none), which also renews; print {election, term,\n"
    "      ttl_ms, value}\n"
    "  resign NAME (--lease ID | --lease-file FILE)\n"
    "      give the leadership up; the next candidate leads at once; print {election,\n"
    "      resigned}\n"
    "  token new NAME PREFIXES VERBS [max_leases=N] [max_waiters=N] [acquire_rate=N]\n"
    "      print a new random bearer token, and on the next line its line for\n"
    "      picketd's --auth-file (NAME sha256:HEX PREFIXES VERBS [limits]); PREFIXES is\n"
    "      a comma list of lock-name prefixes or *, VERBS a comma list of lock, read,\n"
    "      metrics, list, admin. Contacts no server.\n"
    "\n"
    "flags:\n"
    "  --server URL   picketd to talk to (default $PICKET_SERVER, else " PICKET_DEFAULT_SERVER ")\n"
    "  --cacert FILE  https: trust the CAs in this PEM file instead of the system's\n"
    "                 (default $PICKET_CACERT)\n"
    "  --cert FILE --key FILE  https to a picketd with --tls-client-ca: this client's PEM\n"
    "                 certificate and key (default $PICKET_CERT and $PICKET_KEY)\n"
    "  --token-file FILE  send the token on the file's first line as Authorization: Bearer\n"
    "                 (default: the token in $PICKET_TOKEN; a token is never a flag's value)\n"
    "  --ttl D        lease time to live (default 30s)\n"
    "  --wait D       how long the server may wait for the lock (default 0s: fail at once;\n"
    "                 at most the server's --max-wait-ms, 60s by default); elect: how long\n"
    "                 to wait in line in all (default: no end)\n"
    "  --grace D      run: time between SIGTERM and SIGKILL after a lost lease (default 5s)\n"
    "  --lock-delay D if the lease expires without a release, nobody gets the lock for D\n"
    "                 after (default 0s; at most the server's --max-lock-delay-ms, 60s)\n"
    "  --max-hold D   no renewal carries the lease past grant + D (default: no cap)\n"
    "  --owner X      a label others see in status and lock_held (up to 128 characters)\n"
    "  --value V      elect, proclaim: the leader's value others see (up to 4096 bytes)\n"
    "  --lease ID     the lease id (32 lowercase hex); acquire: choose it (default random)\n"
    "  --lease-file FILE  renew, release: the lease id is the file's first line; without\n"
    "                 --lease or --lease-file, $PICKET_LEASE (as `picket run` exports it)\n"
    "  --shell        acquire: print shell assignments instead of JSON\n"
    "  --semaphore    NAME is a counting semaphore's (at most 180 bytes); the command\n"
    "                 works on one of its permits\n"
    "  --limit N      acquire, run with --semaphore: how many permits the semaphore has\n"
    "                 (1 to the server's --max-semaphore-limit, 4096 by default); all\n"
    "                 live permits share one limit. ls: names a page, 1 to 1000\n"
    "                 (default 100)\n"
    "  --read         acquire, run: a read lease of read/write lock NAME (at most 197\n"
    "                 bytes); readers share it, a writer holding or waiting keeps them out\n"
    "  --write        acquire, run: the write lease of read/write lock NAME; readers and\n"
    "                 other writers are kept out, and its fence is above every earlier one\n"
    "  --rwlock       renew, release, status: NAME is a read/write lock's\n"
    "  --all          ls: follow the listing to its end (at most 10000 pages)\n"
    "  --json         ls, show, break, watch: print the API's JSON instead of text for people\n"
    "  --count N      watch: exit 0 after N events (heartbeats are neither shown nor counted)\n"
    "  --yes          break: do not ask (needed when stdin is not a terminal)\n"
    "  -h, --help     this text;  --version  the version\n"
    "  Durations are an integer with a unit: 250ms, 30s, 5m, 1h (a bare number is an error).\n"
    "  Flags take their value as the next argument or after '=' (--ttl=30s).\n"
    "\n"
    "exit codes:\n"
    "  0    success (run: the command's own status, 128+N if killed by signal N)\n"
    "  1    failure: server unreachable or unavailable, store error, unexpected reply,\n"
    "       a token that may not (401/403), a break not confirmed\n"
    "  2    usage: bad command, flag, duration, name, lease id, token or CA file\n"
    "       (or the server said 400, or --limit is not the semaphore's live limit)\n"
    "  75   the lock is held by another lease, or every permit of the semaphore is, or\n"
    "       the rwlock in a mode that excludes the one asked for, or the election has\n"
    "       another leader (after --wait); run, elect: CMD was not started\n"
    "  76   the lease was lost (renew/release/proclaim/resign: no longer held; run,\n"
    "       elect: CMD was stopped)\n"
    "  125  run, elect: picket failed around the command (e.g. could not fork)\n"
    "  126  run, elect: CMD could not be executed;  127  CMD not found\n";

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "picket: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (see picket --help)\n");
  return CLI_EXIT_USAGE;
}

int cli_report(picket_client *c, const char *what, int err) {
  const char *msg = c ? picket_client_error_message(c) : "";
  fprintf(stderr, "picket: %s: %s", what, picket_strerror(err));
  int delay = err == PICKET_EHELD && c != NULL &&
              strcmp(picket_client_error_code(c), "lock_delay") == 0;
  int full = err == PICKET_EHELD && c != NULL &&
             strcmp(picket_client_error_code(c), "semaphore_full") == 0;
  if (full) {
    fprintf(stderr, ": %s", msg);
    if (picket_client_retry_after_ms(c) >= 0)
      fprintf(stderr, "; the first expires in %lld ms unless renewed or released",
              (long long)picket_client_retry_after_ms(c));
  } else if (delay) {
    /* not held: an expired lease's lock-delay keeps it */
    fprintf(stderr, ": %s", msg);
    if (picket_client_retry_after_ms(c) >= 0)
      fprintf(stderr, "; free in %lld ms", (long long)picket_client_retry_after_ms(c));
  } else if ((err == PICKET_EHELD || err == PICKET_ELEADER) && c != NULL) {
    const char *holder = picket_client_holder(c);
    if (holder) fprintf(stderr, " (owner %s)", holder);
    if (picket_client_retry_after_ms(c) >= 0)
      fprintf(stderr, "; it expires in %lld ms unless renewed",
              (long long)picket_client_retry_after_ms(c));
  } else if (msg[0] != '\0' && strcmp(msg, picket_strerror(err)) != 0) {
    fprintf(stderr, ": %s", msg);
  }
  fputc('\n', stderr);
  switch (err) {
  case PICKET_EHELD:
  case PICKET_ELEADER:
    return CLI_EXIT_HELD;
  case PICKET_ELOST:
  case PICKET_EEXPIRED:
  case PICKET_ECAPPED:
    return CLI_EXIT_LOST;
  case PICKET_EINVAL:
  case PICKET_EMISMATCH:
    return CLI_EXIT_USAGE;
  default:
    return CLI_EXIT_FAIL;
  }
}

/* Parses "250ms", "30s", "5m", "1h" into milliseconds. Returns 0 or -1. */
static int parse_duration(const char *s, int64_t *out) {
  const int64_t limit = INT64_C(1) << 40; /* ~35 years: no overflow below */
  int64_t v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (*p - '0');
    if (v > limit) return -1;
  }
  int64_t unit;
  if (strcmp(p, "ms") == 0)
    unit = 1;
  else if (strcmp(p, "s") == 0)
    unit = 1000;
  else if (strcmp(p, "m") == 0)
    unit = 60000;
  else if (strcmp(p, "h") == 0)
    unit = 3600000;
  else
    return -1;
  *out = v * unit;
  return 0;
}

/* Which flags each command takes. */
enum { F_TTL = 1, F_WAIT = 2, F_GRACE = 4, F_OWNER = 8, F_LEASE = 16, F_SHELL = 32,
       F_LEASE_FILE = 64, F_LOCK_DELAY = 128, F_MAX_HOLD = 256, F_SEMAPHORE = 512,
       F_LIMIT = 1024, F_READ = 2048, F_WRITE = 4096, F_RWLOCK = 8192, F_ALL = 16384,
       F_JSON = 32768, F_YES = 65536, F_COUNT = 131072, F_VALUE = 262144 };
/* the flags that take no value */
#define F_SWITCHES (F_SHELL | F_SEMAPHORE | F_READ | F_WRITE | F_RWLOCK | F_ALL | F_JSON | F_YES)
static const struct {
  const char *name;
  int flags;
} commands[] = {
    {"acquire", F_TTL | F_WAIT | F_OWNER | F_LEASE | F_SHELL | F_LOCK_DELAY | F_MAX_HOLD |
                    F_SEMAPHORE | F_LIMIT | F_READ | F_WRITE},
    {"renew", F_TTL | F_LEASE | F_LEASE_FILE | F_SEMAPHORE | F_RWLOCK},
    {"release", F_LEASE | F_LEASE_FILE | F_SEMAPHORE | F_RWLOCK},
    {"status", F_SEMAPHORE | F_RWLOCK},
    {"run", F_TTL | F_WAIT | F_GRACE | F_OWNER | F_LOCK_DELAY | F_MAX_HOLD | F_SEMAPHORE | F_LIMIT |
                F_READ | F_WRITE},
    {"ls", F_LIMIT | F_ALL | F_JSON},
    {"show", F_JSON},
    {"break", F_YES | F_JSON},
    {"watch", F_JSON | F_COUNT},
    {"elect", F_TTL | F_WAIT | F_GRACE | F_OWNER | F_VALUE},
    {"leader", 0},
    {"proclaim", F_VALUE | F_TTL | F_LEASE | F_LEASE_FILE},
    {"resign", F_LEASE | F_LEASE_FILE},
};

/* Commands whose NAME is an election's. */
static int election_command(const char *command) {
  return strcmp(command, "elect") == 0 || strcmp(command, "leader") == 0 ||
         strcmp(command, "proclaim") == 0 || strcmp(command, "resign") == 0;
}

/* Commands that run a command given after NAME (and "--"). */
static int runs_command(const char *command) {
  return command != NULL && (strcmp(command, "run") == 0 || strcmp(command, "elect") == 0);
}

/* Commands that name a lease: by --lease, --lease-file or $PICKET_LEASE. */
static int lease_command(const char *command) {
  return strcmp(command, "renew") == 0 || strcmp(command, "release") == 0 ||
         strcmp(command, "proclaim") == 0 || strcmp(command, "resign") == 0;
}

static int flag_bit(const char *name) {
  static const struct {
    const char *name;
    int bit;
  } flags[] = {{"ttl", F_TTL},     {"wait", F_WAIT},   {"grace", F_GRACE},
               {"owner", F_OWNER}, {"lease", F_LEASE}, {"shell", F_SHELL},
               {"lease-file", F_LEASE_FILE}, {"lock-delay", F_LOCK_DELAY},
               {"max-hold", F_MAX_HOLD}, {"semaphore", F_SEMAPHORE}, {"limit", F_LIMIT},
               {"read", F_READ}, {"write", F_WRITE}, {"rwlock", F_RWLOCK},
               {"all", F_ALL}, {"json", F_JSON}, {"yes", F_YES}, {"count", F_COUNT},
               {"value", F_VALUE}};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    if (strcmp(flags[i].name, name) == 0) return flags[i].bit;
  return 0;
}

/* Flags any command takes, before or after it. */
static int global_flag(const char *flag) {
  return strcmp(flag, "server") == 0 || strcmp(flag, "cacert") == 0 ||
         strcmp(flag, "token-file") == 0 || strcmp(flag, "cert") == 0 || strcmp(flag, "key") == 0;
}

#define TOKEN_MAX 4096
static char token_buf[TOKEN_MAX + 1], lease_buf[TOKEN_MAX + 1]; /* read whole, then checked */

/* A token or lease id: 1..cap-1 bytes of printable ASCII without spaces
 * (what fits an Authorization header unquoted). Returns 0 or -1. */
static int secret_valid(const char *s, size_t cap) {
  size_t n = strlen(s);
  if (n == 0 || n >= cap) return -1;
  for (; *s; s++)
    if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f) return -1;
  return 0;
}

/* Reads the first line of `path` (named by --`flag`) into out, trailing
 * whitespace stripped. The content is a secret and is never printed.
 * Returns -1 when all is well, else CLI_EXIT_USAGE after one line. */
static int read_secret(const char *flag, const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "picket: --%s %s: %s\n", flag, path, strerror(errno));
    return CLI_EXIT_USAGE;
  }
  char line[TOKEN_MAX + 2];
  if (fgets(line, sizeof line, f) == NULL) line[0] = '\0';
  int more = strchr(line, '\n') == NULL && !feof(f); /* the line did not fit */
  fclose(f);
  size_t n = strlen(line);
  while (n > 0 && strchr(" \t\r\n\v\f", line[n - 1])) line[--n] = '\0';
  const char *why = n == 0 ? "its first line is empty"
                    : more || secret_valid(line, cap) < 0
                        ? "its first line is too long or has a space, control or non-ASCII byte"
                        : NULL;
  if (why == NULL) memcpy(out, line, n + 1);
  explicit_bzero(line, sizeof line);
  if (why == NULL) return -1;
  fprintf(stderr, "picket: --%s %s: %s\n", flag, path, why);
  return CLI_EXIT_USAGE;
}

/* $NAME, or NULL when unset or empty (an empty variable counts as unset). */
static const char *env_value(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* The lease id, token and CA file that did not come as flags: from their
 * files and the environment. Returns -1 when all is well, else an exit code. */
static int resolve_secrets(cli_args *a) {
  int rc;
  int lease_cmd = lease_command(a->command);
  if (lease_cmd && a->lease == NULL && a->lease_file != NULL) {
    if ((rc = read_secret("lease-file", a->lease_file, lease_buf, sizeof lease_buf)) >= 0) return rc;
    if (!picket_proto_lease_valid(lease_buf, strlen(lease_buf))) {
      fprintf(stderr, "picket: --lease-file %s: not a lease id (32 lowercase hex digits)\n",
              a->lease_file);
      return CLI_EXIT_USAGE;
    }
    a->lease = lease_buf;
  } else if (lease_cmd && a->lease == NULL && env_value(PICKET_PROTO_ENV_LEASE) != NULL) {
    a->lease = env_value(PICKET_PROTO_ENV_LEASE);
    if (!picket_proto_lease_valid(a->lease, strlen(a->lease))) {
      fprintf(stderr, "picket: %s is not a lease id (32 lowercase hex digits)\n",
              PICKET_PROTO_ENV_LEASE);
      return CLI_EXIT_USAGE;
    }
  }
  if (a->token_file != NULL) {
    if ((rc = read_secret("token-file", a->token_file, token_buf, sizeof token_buf)) >= 0) return rc;
    a->token = token_buf;
  } else if ((a->token = env_value("PICKET_TOKEN")) != NULL &&
             secret_valid(a->token, TOKEN_MAX + 1) < 0) {
    fprintf(stderr, "picket: PICKET_TOKEN is too long or has a space, control or non-ASCII byte\n");
    return CLI_EXIT_USAGE;
  }
  if (a->ca_file == NULL) a->ca_file = env_value("PICKET_CACERT");
  if (a->cert_file == NULL) a->cert_file = env_value("PICKET_CERT");
  if (a->key_file == NULL) a->key_file = env_value("PICKET_KEY");
  if ((a->cert_file == NULL) != (a->key_file == NULL)) {
    fprintf(stderr, "picket: --cert and --key (or PICKET_CERT and PICKET_KEY) go together\n");
    return CLI_EXIT_USAGE;
  }
  /* libcurl would only say so at the first call, as a transport error. */
  const char *files[][2] = {{"--cacert", a->ca_file}, {"--cert", a->cert_file}, {"--key", a->key_file}};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    if (files[i][1] == NULL) continue;
    FILE *f = fopen(files[i][1], "r");
    if (f == NULL) {
      fprintf(stderr, "picket: %s %s: %s\n", files[i][0], files[i][1], strerror(errno));
      return CLI_EXIT_USAGE;
    }
    fclose(f);
  }
  return -1;
}

/* Parses argv into *a. Returns -1 when all is well, else an exit code
 * (help or version: 0; errors: 2, after printing one line). */
static int parse(int argc, char **argv, cli_args *a) {
  int allowed = 0, value_given = 0;
  char flag[32];
  a->grace_ms = 5000;
  a->server = getenv("PICKET_SERVER");
  if (a->server != NULL && a->server[0] == '\0') a->server = NULL; /* set but empty: unset */
  a->server_from_env = a->server != NULL;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0 || strcmp(arg, "help") == 0) {
      fputs(usage_text, stdout);
      return CLI_EXIT_OK;
    }
    if (strcmp(arg, "--version") == 0) {
      printf("picket %s\n", PICKET_VERSION);
      return CLI_EXIT_OK;
    }
    if (strcmp(arg, "--") == 0 || (a->name != NULL && runs_command(a->command) &&
                                   strncmp(arg, "--", 2) != 0)) {
      if (!runs_command(a->command))
        return usage_error("unexpected '%s': only run and elect take a command", arg);
      if (a->name == NULL) return usage_error("%s needs a NAME before the command", a->command);
      int start = strcmp(arg, "--") == 0 ? i + 1 : i;
      if (start >= argc) return usage_error("%s needs a command after --", a->command);
      a->argv = argv + start;
      break;
    }
    if (strncmp(arg, "--", 2) == 0) {
      const char *eq = strchr(arg, '=');
      size_t n = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
      if (n >= sizeof flag) return usage_error("unknown flag %s", arg);
      memcpy(flag, arg + 2, n);
      flag[n] = '\0';
      int bit = flag_bit(flag);
      if (strcmp(flag, "token") == 0) { /* never echo it: its value may be a token */
        fprintf(stderr, "picket: there is no --token: a token in argv is visible to every user "
                        "(ps); use --token-file FILE or PICKET_TOKEN\n");
        return CLI_EXIT_USAGE;
      }
      if (!global_flag(flag)) {
        if (bit == 0) return usage_error("unknown flag %s", arg);
        if (a->command == NULL) return usage_error("%s must come after the command", arg);
        if (!(allowed & bit)) {
          fprintf(stderr, "picket: %s does not take --%s (see picket --help)\n", a->command, flag);
          return CLI_EXIT_USAGE;
        }
      }
      if (bit & F_SWITCHES) {
        if (eq) return usage_error("--%s takes no value", flag);
        if (bit == F_SHELL) a->shell = 1;
        if (bit == F_SEMAPHORE) a->semaphore = 1;
        if (bit == F_ALL) a->all = 1;
        if (bit == F_JSON) a->json = 1;
        if (bit == F_YES) a->yes = 1;
        if (bit & (F_READ | F_WRITE | F_RWLOCK)) {
          int mode = bit == F_READ ? PICKET_MODE_READ : bit == F_WRITE ? PICKET_MODE_WRITE : -1;
          if (a->rwlock && mode != a->mode)
            return usage_error("--read or --write: one of them%s", "");
          a->rwlock = 1;
          a->mode = mode;
        }
        continue;
      }
      const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
      if (val == NULL) return usage_error("--%s needs a value", flag);
      if (strcmp(flag, "server") == 0) {
        a->server = val;
        a->server_from_env = 0;
      } else if (strcmp(flag, "cacert") == 0) {
        a->ca_file = val;
      } else if (strcmp(flag, "cert") == 0) {
        a->cert_file = val;
      } else if (strcmp(flag, "key") == 0) {
        a->key_file = val;
      } else if (strcmp(flag, "token-file") == 0) {
        a->token_file = val;
      } else if (bit == F_LEASE_FILE) {
        a->lease_file = val;
      } else if (bit == F_VALUE) {
        value_given = F_VALUE;
        a->value = val[0] ? val : NULL; /* "": none. libpicket checks the rest
                                             (exit 2) before any request */
      } else if (bit == F_OWNER) {
        if (!picket_proto_owner_valid(val, strlen(val)))
          return usage_error("--owner: at most 128 characters of UTF-8 without control characters: %s",
                             val);
        a->owner = val;
      } else if (bit == F_LIMIT || bit == F_COUNT) {
        char *end;
        errno = 0;
        long long v = strtoll(val, &end, 10);
        int ls = strcmp(a->command, "ls") == 0;
        long long max = bit == F_COUNT ? 1000000000LL : ls ? PICKET_LIST_MAX : PICKET_SEM_LIMIT_MAX;
        if (val[0] < '0' || val[0] > '9' || *end != '\0' || errno != 0 || v < 1 || v > max)
          return usage_error(bit == F_COUNT ? "--count: a number of events, 1 to 1000000000, "
                                              "not '%s'"
                             : ls           ? "--limit: names a page, 1 to 1000, not '%s'"
                                            : "--limit: a number of permits, 1 to 100000, not '%s'",
                             val);
        if (bit == F_COUNT)
          a->count = v;
        else
          a->limit = v;
      } else if (bit == F_LEASE) {
        if (!picket_proto_lease_valid(val, strlen(val)))
          return usage_error("--lease: a lease id is 32 lowercase hex digits, not '%s'", val);
        a->lease = val;
      } else {
        int64_t ms;
        if (parse_duration(val, &ms) != 0) {
          fprintf(stderr,
                  "picket: --%s: '%s' is not a duration: use an integer with a unit, e.g. 250ms, "
                  "30s, 5m, 1h\n",
                  flag, val);
          return CLI_EXIT_USAGE;
        }
        if (bit == F_TTL && ms == 0) return usage_error("--ttl must be more than %s", "0");
        if (bit == F_TTL) a->ttl_ms = ms;
        if (bit == F_WAIT) {
          a->wait_ms = ms;
          a->wait_set = 1;
        }
        if (bit == F_GRACE) a->grace_ms = ms;
        if (bit == F_LOCK_DELAY) a->lock_delay_ms = ms;
        if (bit == F_MAX_HOLD) {
          if (ms == 0) return usage_error("--max-hold must be more than %s", "0");
          a->max_hold_ms = ms;
        }
      }
      continue;
    }
    if (arg[0] == '-' && arg[1] != '\0') return usage_error("unknown flag %s", arg);
    if (a->command == NULL) {
      for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        if (strcmp(commands[k].name, arg) == 0) {
          a->command = commands[k].name;
          allowed = commands[k].flags;
        }
      if (a->command == NULL) return usage_error("unknown command '%s'", arg);
    } else if (strcmp(a->command, "ls") == 0) {
      size_t n = strlen(arg);
      if (a->prefix != NULL) return usage_error("unexpected argument '%s'", arg);
      if (n > PICKET_NAME_MAX ||
          strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") != n)
        return usage_error("invalid prefix '%s': use up to 200 bytes of [A-Za-z0-9._:-]", arg);
      a->prefix = arg;
    } else if (a->name == NULL) {
      if (!picket_proto_name_valid(arg, strlen(arg)))
        return usage_error("invalid lock name '%s': use 1-200 bytes of [A-Za-z0-9._:-]", arg);
      a->name = arg;
    } else {
      return usage_error("unexpected argument '%s'", arg);
    }
  }
  if (a->command == NULL) return usage_error("%s", "no command given");
  a->election = election_command(a->command);
  if (a->election && a->name != NULL && strlen(a->name) > PICKET_ELECTION_NAME_MAX)
    return usage_error("invalid election name '%s': use 1-197 bytes of [A-Za-z0-9._:-]", a->name);
  if (a->name == NULL && strcmp(a->command, "ls") != 0) {
    fprintf(stderr, "picket: %s needs %s NAME (see picket --help)\n", a->command,
            election_command(a->command) ? "an election" : "a lock");
    return CLI_EXIT_USAGE;
  }
  if (strcmp(a->command, "break") == 0 && !a->yes && !isatty(STDIN_FILENO))
    return usage_error("break asks before it breaks: give --yes when stdin is not a "
                       "terminal%s", "");
  if (a->semaphore && strlen(a->name) > PICKET_SEM_NAME_MAX)
    return usage_error("invalid semaphore name '%s': use 1-180 bytes of [A-Za-z0-9._:-]", a->name);
  if (a->limit > 0 && !a->semaphore && strcmp(a->command, "ls") != 0)
    return usage_error("--limit goes with --semaphore%s", "");
  if (a->semaphore && a->rwlock)
    return usage_error("--semaphore or --%s: one of them",
                       a->mode == PICKET_MODE_READ    ? "read"
                       : a->mode == PICKET_MODE_WRITE ? "write"
                                                      : "rwlock");
  if (a->rwlock && strlen(a->name) > PICKET_RW_NAME_MAX)
    return usage_error("invalid rwlock name '%s': use 1-197 bytes of [A-Za-z0-9._:-]", a->name);
  if (a->semaphore && a->limit == 0 && (allowed & F_LIMIT))
    return usage_error("%s --semaphore needs --limit N", a->command);
  int rc = resolve_secrets(a);
  if (rc >= 0) return rc;
  if (lease_command(a->command) && a->lease == NULL) {
    fprintf(stderr, "picket: %s needs --lease ID, --lease-file FILE or PICKET_LEASE (see picket "
                    "--help)\n", a->command);
    return CLI_EXIT_USAGE;
  }
  if (runs_command(a->command) && a->argv == NULL) {
    fprintf(stderr, "picket: %s needs a command: picket %s NAME [FLAGS] -- CMD [ARGS...] (see "
                    "picket --help)\n", a->command, a->command);
    return CLI_EXIT_USAGE;
  }
  if (strcmp(a->command, "proclaim") == 0 && !(allowed & F_VALUE & value_given))
    return usage_error("proclaim needs --value V (%s one clears it)", "an empty");
  return -1;
}

int cli_print_json(json_t *obj) {
  char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
  json_decref(obj);
  if (s == NULL) {
    fprintf(stderr, "picket: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  puts(s);
  free(s);
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

json_t *cli_string_or_null(const char *s) { return s ? json_string(s) : json_null(); }

int cli_acquire(picket_client *c, const cli_args *a, picket_lease **out) {
  picket_acquire_opts o = {.ttl_ms = a->ttl_ms, .wait_ms = a->wait_ms, .owner = a->owner,
                           .lease_id = a->lease, .lock_delay_ms = a->lock_delay_ms,
                           .max_hold_ms = a->max_hold_ms};
  return a->semaphore ? picket_sem_acquire(c, a->name, a->limit, &o, out)
         : a->rwlock ? picket_rw_acquire(c, a->name, a->mode, &o, out)
                     : picket_acquire(c, a->name, &o, out);
}

/* {"lock": NAME}, or {"semaphore": NAME} with --semaphore, or {"rwlock":
 * NAME} with --read, --write or --rwlock: a reply's start. */
static json_t *named(const cli_args *a) {
  return json_pack("{ss}", a->semaphore ? "semaphore" : a->rwlock ? "rwlock" : "lock", a->name);
}

static const char *mode_name(const picket_lease *l) {
  return picket_lease_mode(l) == PICKET_MODE_WRITE ? "write" : "read";
}

/* A permit's slot and fence lock (and limit, when known), or an rwlock
 * lease's mode and fence lock, into j. */
static void add_permit(json_t *j, const picket_lease *l) {
  if (j != NULL && picket_lease_is_rwlock(l)) {
    if (picket_lease_mode(l) >= 0) json_object_set_new(j, "mode", json_string(mode_name(l)));
    json_object_set_new(j, "fence_lock", cli_string_or_null(picket_lease_fence_lock(l)));
  }
  if (j == NULL || !picket_lease_is_permit(l)) return;
  json_object_set_new(j, "permit", json_integer(picket_lease_permit(l)));
  if (picket_lease_limit(l) > 0) json_object_set_new(j, "limit", json_integer(picket_lease_limit(l)));
  json_object_set_new(j, "fence_lock", cli_string_or_null(picket_lease_fence_lock(l)));
}

static int cmd_acquire(picket_client *c, const cli_args *a) {
  picket_lease *l = NULL;
  char what[300];
  snprintf(what, sizeof what, "acquire %s", a->name);
  int err = cli_acquire(c, a, &l);
  if (err != 0) return cli_report(c, what, err);
  int rc;
  const char *token = picket_lease_fence_token(l);
  if (a->shell) {
    printf("%s=%s\n%s=%lld\n%s=%s\n", PICKET_PROTO_ENV_LOCK, picket_lease_fence_lock(l),
           PICKET_PROTO_ENV_FENCE, (long long)picket_lease_fence(l), PICKET_PROTO_ENV_LEASE,
           picket_lease_id(l));
    if (token) printf("%s=%s\n", PICKET_PROTO_ENV_FENCE_TOKEN, token);
    if (a->semaphore)
      printf("%s=%lld\n%s=%s\n", PICKET_PROTO_ENV_PERMIT, (long long)picket_lease_permit(l),
             PICKET_PROTO_ENV_SEMAPHORE, picket_lease_lock(l));
    if (a->rwlock)
      printf("%s=%s\n%s=%s\n", PICKET_PROTO_ENV_MODE, mode_name(l), PICKET_PROTO_ENV_RWLOCK,
             picket_lease_lock(l));
    rc = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  } else {
    json_t *j = named(a);
    if (j) json_object_set_new(j, "lease", json_string(picket_lease_id(l)));
    if (j) json_object_set_new(j, "fence", json_integer(picket_lease_fence(l)));
    if (j) json_object_set_new(j, "ttl_ms", json_integer(picket_lease_ttl_ms(l)));
    if (j) json_object_set_new(j, "owner", cli_string_or_null(picket_lease_owner(l)));
    add_permit(j, l);
    if (j && token) json_object_set_new(j, "fence_token", json_string(token));
    rc = cli_print_json(j);
  }
  picket_lease_free(l);
  return rc;
}

static int cmd_renew_release(picket_client *c, const cli_args *a, int renew) {
  picket_lease *l = NULL;
  char what[300];
  snprintf(what, sizeof what, "%s %s", a->command, a->name);
  int err = a->semaphore ? picket_sem_lease_new(a->name, a->lease, &l)
            : a->rwlock  ? picket_rw_lease_new(a->name, a->lease, &l)
                         : picket_lease_new(a->name, a->lease, &l);
  if (err == 0) err = renew ? picket_renew(c, l, a->ttl_ms) : picket_release(c, l);
  int rc;
  json_t *j = err == 0 ? named(a) : NULL;
  if (err != 0) {
    rc = cli_report(c, what, err);
  } else if (renew) {
    add_permit(j, l);
    if (j) json_object_set_new(j, "fence", json_integer(picket_lease_fence(l)));
    if (j) json_object_set_new(j, "ttl_ms", json_integer(picket_lease_ttl_ms(l)));
    rc = cli_print_json(j);
  } else {
    if (j) json_object_set_new(j, "released", json_true());
    rc = cli_print_json(j);
  }
  picket_lease_free(l);
  return rc;
}

/* status --semaphore: {semaphore, limit, held, permits, waiters}. */
static int sem_status(picket_client *c, const cli_args *a, const char *what) {
  picket_sem_info info;
  int err = picket_sem_inspect(c, a->name, &info);
  if (err != 0) return cli_report(c, what, err);
  json_t *permits = json_array();
  for (size_t i = 0; permits && i < info.npermits; i++) {
    const picket_permit_info *p = &info.permits[i];
    json_t *o = json_pack("{sI sI sI so ss}", "permit", (json_int_t)p->permit, "fence",
                          (json_int_t)p->fence, "ttl_ms", (json_int_t)p->ttl_ms, "owner",
                          cli_string_or_null(p->has_owner ? p->owner : NULL), "fence_lock",
                          p->fence_lock);
    if (o && p->lock_delay_ms > 0)
      json_object_set_new(o, "lock_delay_ms", json_integer(p->lock_delay_ms));
    json_array_append_new(permits, o);
  }
  json_t *j = json_pack("{ss sI sI so sI}", "semaphore", a->name, "limit", (json_int_t)info.limit,
                        "held", (json_int_t)info.held, "permits", permits, "waiters",
                        (json_int_t)info.waiters);
  picket_sem_info_clear(&info);
  return cli_print_json(j);
}

/* status --rwlock: {rwlock, fence, fence_lock, writer, readers, read_leases,
 * writers_waiting, waiters}. */
static int rw_status(picket_client *c, const cli_args *a, const char *what) {
  picket_rw_info info;
  int err = picket_rw_inspect(c, a->name, &info);
  if (err != 0) return cli_report(c, what, err);
  json_t *reads = json_array();
  for (size_t i = 0; reads && i < info.nreads; i++) {
    const picket_read_info *r = &info.reads[i];
    json_array_append_new(reads, json_pack("{sI sI so}", "fence", (json_int_t)r->fence, "ttl_ms",
                                           (json_int_t)r->ttl_ms, "owner",
                                           cli_string_or_null(r->has_owner ? r->owner : NULL)));
  }
  json_t *writer = json_null();
  if (info.writer) {
    writer = json_pack("{sI so}", "ttl_ms", (json_int_t)info.writer_ttl_ms, "owner",
                       cli_string_or_null(info.has_writer_owner ? info.writer_owner : NULL));
    if (writer && info.writer_lock_delay_ms > 0)
      json_object_set_new(writer, "lock_delay_ms", json_integer(info.writer_lock_delay_ms));
  }
  char fence_lock[PICKET_NAME_MAX + 1];
  snprintf(fence_lock, sizeof fence_lock, "%s:rw", a->name);
  json_t *j = json_pack("{ss sI ss so sI so sI sI}", "rwlock", a->name, "fence",
                        (json_int_t)info.fence, "fence_lock", fence_lock, "writer", writer,
                        "readers", (json_int_t)info.readers, "read_leases", reads,
                        "writers_waiting", (json_int_t)info.writers_waiting, "waiters",
                        (json_int_t)info.waiters);
  picket_rw_info_clear(&info);
  return cli_print_json(j);
}

static int cmd_status(picket_client *c, const cli_args *a) {
  picket_lock_info info;
  char what[300];
  snprintf(what, sizeof what, "status %s", a->name);
  if (a->semaphore) return sem_status(c, a, what);
  if (a->rwlock) return rw_status(c, a, what);
  int err = picket_inspect(c, a->name, &info);
  if (err != 0) return cli_report(c, what, err);
  return cli_print_json(json_pack("{ss sb sI sI so}", "lock", a->name, "held", info.held, "fence",
                              (json_int_t)info.fence, "ttl_ms", (json_int_t)info.ttl_ms, "owner",
                              cli_string_or_null(info.has_owner ? info.owner : NULL)));
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "token") == 0) return cli_token(argc - 1, argv + 1);
  cli_args a = {0};
  a.mode = -1;
  int rc = parse(argc, argv, &a);
  if (rc >= 0) return rc;

  picket_client *c = NULL;
  picket_options o;
  picket_options_init(&o);
  o.bearer_token = a.token;
  o.ca_file = a.ca_file;
  o.cert_file = a.cert_file;
  o.key_file = a.key_file;
  int err = picket_client_new(a.server, &o, &c);
  if (err == PICKET_EINVAL) {
    fprintf(stderr, "picket: %s: '%s' is not an http:// or https:// URL (see picket --help)\n",
            a.server_from_env ? "PICKET_SERVER" : "--server", a.server);
    return CLI_EXIT_USAGE;
  }
  if (err != 0) return cli_report(NULL, "starting", err);

  if (strcmp(a.command, "acquire") == 0)
    rc = cmd_acquire(c, &a);
  else if (strcmp(a.command, "renew") == 0)
    rc = cmd_renew_release(c, &a, 1);
  else if (strcmp(a.command, "release") == 0)
    rc = cmd_renew_release(c, &a, 0);
  else if (strcmp(a.command, "status") == 0)
    rc = cmd_status(c, &a);
  else if (strcmp(a.command, "ls") == 0)
    rc = cli_ls(c, &a);
  else if (strcmp(a.command, "show") == 0)
    rc = cli_show(c, &a);
  else if (strcmp(a.command, "break") == 0)
    rc = cli_break(c, &a);
  else if (strcmp(a.command, "watch") == 0)
    rc = cli_watch(c, &a);
  else if (strcmp(a.command, "elect") == 0)
    rc = cli_elect(c, &a);
  else if (strcmp(a.command, "leader") == 0)
    rc = cli_leader(c, &a);
  else if (strcmp(a.command, "proclaim") == 0 || strcmp(a.command, "resign") == 0)
    rc = cli_proclaim_resign(c, &a);
  else
    rc = cli_run(c, &a);
  picket_client_free(c);
  return rc;
}
