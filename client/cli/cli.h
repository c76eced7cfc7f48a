/* cli.h: what the files of the `picket` command share: parsed arguments,
 * exit codes, JSON output, the run command (run.c), the operators'
 * commands (ops.c), watch (watch.c) and the election commands (elect.c).
 * main.c parses and runs the other commands. */
#ifndef PICKET_CLI_H
#define PICKET_CLI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "picket/picket.h"

/* Exit codes; `picket --help` and README.md list them. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1      /* server unreachable, store error, bad reply */
#define CLI_EXIT_USAGE 2     /* bad flag, value or name (also the server's 400) */
#define CLI_EXIT_HELD 75     /* lock held, or the election has a leader (and --wait
                                ran out): nothing was run */
#define CLI_EXIT_LOST 76     /* the lease was lost (run: the child was stopped) */
#define CLI_EXIT_RUN_FAIL 125 /* run: picket itself failed before or around the child */
#define CLI_EXIT_NOEXEC 126  /* run: the command could not be executed */
#define CLI_EXIT_NOTFOUND 127 /* run: the command was not found */

/* Environment that `picket elect` gives its command beside run's (whose
 * PICKET_LOCK is then the election's name and PICKET_FENCE the term). */
#define CLI_ENV_ELECTION "PICKET_ELECTION"
#define CLI_ENV_TERM "PICKET_TERM"

typedef struct {
  const char *command; /* "acquire", "renew", ... */
  const char *server;  /* NULL: the default */
  int server_from_env; /* server came from $PICKET_SERVER (for messages) */
  const char *name;
  int64_t ttl_ms;   /* 0: not given */
  int64_t wait_ms;
  int64_t grace_ms;
  int64_t lock_delay_ms; /* 0: none */
  int64_t max_hold_ms;   /* 0: no cap */
  const char *owner;
  const char *lease;      /* --lease, --lease-file or $PICKET_LEASE (renew, release) */
  const char *lease_file;
  const char *ca_file;    /* --cacert or $PICKET_CACERT; NULL: the system's CAs */
  const char *cert_file;  /* --cert or $PICKET_CERT: mutual TLS; with key_file */
  const char *key_file;   /* --key or $PICKET_KEY */
  const char *token_file; /* --token-file; else $PICKET_TOKEN */
  const char *token;      /* the bearer token, never from argv; NULL: none */
  int shell;
  char **argv; /* run: the child's argv, NULL-terminated */
  int semaphore; /* --semaphore: NAME is a counting semaphore's */
  int64_t limit; /* --limit: its permits (acquire, run); 0: not given */
  int rwlock;    /* --read, --write or --rwlock: NAME is a read/write lock's */
  int mode;      /* --read: PICKET_MODE_READ, --write: PICKET_MODE_WRITE; else -1 */
  const char *prefix; /* ls: the names' prefix; NULL: all */
  int all;            /* ls --all: every page */
  int json;           /* ls, show, break --json: the replies as JSON */
  int yes;            /* break --yes: no confirmation */
  int64_t count;      /* watch --count: exit after this many events; 0: never */
  int wait_set;       /* --wait was given (elect: else wait without end) */
  const char *value;  /* elect, proclaim --value: the leader's value; NULL: none */
  int election;       /* the command's NAME is an election's */
} cli_args;

/* Prints "picket: <what>: <error>[: <server message>]" to stderr and returns
 * the exit code for err. */
int cli_report(picket_client *c, const char *what, int err);

/* Takes the lock a->name, or with --semaphore one of its permits, or with
 * --read/--write a read or write lease of the rwlock, with the flags'
 * options. Returns 0 and sets *out (free with picket_lease_free) or
 * a PICKET_E* code (the detail is on c). */
int cli_acquire(picket_client *c, const cli_args *a, picket_lease **out);

/* `picket run`; returns the exit code. */
int cli_run(picket_client *c, const cli_args *a);
/* Runs a->argv while lease `l` (granted, not freed here) is kept: exports
 * it to the command, keeps it, stops the command when it is lost, and
 * releases it (a leader's: resigns) when the command exits. `what` names
 * the command in messages. Returns the exit code. */
int cli_run_lease(picket_client *c, const cli_args *a, const char *what, picket_lease *l);

/* `picket elect`, `picket leader`, `picket proclaim` and `picket resign`
 * (elect.c); return the exit code. */
int cli_elect(picket_client *c, const cli_args *a);
int cli_leader(picket_client *c, const cli_args *a);
int cli_proclaim_resign(picket_client *c, const cli_args *a);

/* Prints obj (stolen) as one line of JSON; returns the exit code. */
int cli_print_json(json_t *obj);
/* A JSON string of s, or null for NULL. */
json_t *cli_string_or_null(const char *s);

/* `picket ls`, `picket show` and `picket break` (ops.c); return the exit code. */
int cli_ls(picket_client *c, const cli_args *a);
int cli_show(picket_client *c, const cli_args *a);
int cli_break(picket_client *c, const cli_args *a);
/* An epoch time in ms as ISO 8601 UTC with milliseconds (ops.c). */
void cli_fmt_iso(char *buf, size_t cap, int64_t ms);

/* `picket watch` (watch.c); returns the exit code. */
int cli_watch(picket_client *c, const cli_args *a);

/* `picket token ...` (token.c); argv[0] is "token". Returns the exit code. */
int cli_token(int argc, char **argv);

#endif
