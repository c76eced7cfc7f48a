/* cursor.c: the listing cursor's text (cursor.h): "SLOT" (the slot's
 * first name) or "SLOT-K-NAME" (after the index member "NAME K" in that
 * slot). Both backends keep their index as "NAME K" members sorted by
 * name (each backend's listing says how it keeps them), so one form
 * fits both; a backend with one index writes slot 0. */
#include "cursor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void store_cursor_write(store_cursor *c, int slot, const char *member) {
  size_t n = strlen(member);
  if (n >= 2) /* "NAME K" -> "SLOT-K-NAME" */
    snprintf(c->text, sizeof c->text, "%d-%c-%.*s", slot, member[n - 1], (int)(n - 2), member);
  else
    snprintf(c->text, sizeof c->text, "%d", slot);
}

int store_cursor_read(const store_cursor *c, const char *prefix, int *slot, char *member) {
  const char *s = c->text;
  *slot = 0;
  member[0] = '\0';
  if (s[0] == '\0') return 0;
  char *end;
  long n = strtol(s, &end, 10);
  if (s[0] < '0' || s[0] > '9' || n < 0 || n >= STORE_CURSOR_SLOTS) return -1;
  *slot = (int)n;
  if (end[0] == '\0') return 0;
  if (end[0] != '-' || end[1] == '\0' || strchr("lsr", end[1]) == NULL || end[2] != '-')
    return -1;
  const char *name = end + 3, *bare = name;
  /* an election's lock: "/e/NAME", its name shorter than a lock's */
  size_t el = strlen(PICKET_PROTO_ELECTION_STORE_PREFIX);
  if (end[1] == 'l' && strncmp(name, PICKET_PROTO_ELECTION_STORE_PREFIX, el) == 0) {
    bare = name + el;
    if (strlen(bare) > PICKET_PROTO_ELECTION_NAME_MAX) return -1;
  }
  if (!picket_proto_name_valid(bare, strlen(bare)) || strncmp(name, prefix, strlen(prefix)) != 0)
    return -1;
  snprintf(member, PICKET_PROTO_NAME_MAX + 3, "%s %c", name, end[1]);
  return 0;
}
