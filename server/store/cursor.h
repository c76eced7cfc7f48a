/* cursor.h: the listing cursor's one text form, shared by the backends
 * (and the fuzzer's stub store) so that every store writes and checks it
 * alike. The HTTP side never calls these: to it a store_cursor is opaque
 * text it hands back (store.h). */
#ifndef PICKETD_STORE_CURSOR_H
#define PICKETD_STORE_CURSOR_H

#include "store.h"

/* Writes where a listing resumes: in index `slot` (0 for a store with one
 * index; otherwise which of the store's indexes), after the index member
 * `member` ("NAME K": a held name and its kind letter), or from the
 * slot's first name when member is "". */
void store_cursor_write(store_cursor *c, int slot, const char *member);

/* The index numbers a cursor may carry: 0..STORE_CURSOR_SLOTS - 1 (as
 * many as the backend with the most indexes keeps; a store with one index
 * reads any of them as its one, as proto/openapi.yaml's ListCursor allows
 * them all). */
#define STORE_CURSOR_SLOTS 16384

/* Reads c back for a listing of `prefix`: 0 with *slot and member (at
 * least PICKET_PROTO_NAME_MAX + 3 bytes) set, or -1 when c is not a
 * cursor store_cursor_write could have written for this prefix: a slot
 * past STORE_CURSOR_SLOTS, a kind that is not l, s or r, a name that is
 * not valid or that does not start with prefix. "" reads as the start. So
 * a cursor made up by a client can make a listing start anywhere in its
 * own prefix, and nowhere else. */
int store_cursor_read(const store_cursor *c, const char *prefix, int *slot, char *member);

#endif
