/* etcd_json.h: the etcd JSON gateway's encoding (etcd_json.c): base64 for
 * keys and values, and the JSON members as the gateway writes them (64-bit
 * numbers as decimal strings, zero values left out). etcd_client.c's
 * helpers, kept apart so that the client is the calls and nothing else. */
#ifndef PICKETD_ETCD_JSON_H
#define PICKETD_ETCD_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* A malloc'd base64 text of n bytes of s, or NULL (out of memory). */
char *etcd_b64_encode(const char *s, size_t n);
/* Base64 text s decoded into a malloc'd, NUL-terminated buffer, its length
 * in *len; NULL when s is not base64 (or memory ran out). */
char *etcd_b64_decode(const char *s, size_t *len);
/* A 64-bit number member (a string of digits or an integer; absent is 0):
 * 0, or -1 when it is something else. etcd_j_u64 the same, unsigned. */
int etcd_j_i64(const json_t *o, const char *name, int64_t *out);
int etcd_j_u64(const json_t *o, const char *name, uint64_t *out);
/* 1 when o[name] is true. */
int etcd_j_bool(const json_t *o, const char *name);
/* A bytes member decoded (the caller frees *out; "" when absent): 0, or -1
 * when it is not base64. */
int etcd_j_bytes(const json_t *o, const char *name, char **out, size_t *len);
/* Set o[name] to a number as a decimal string, or to the base64 of n bytes
 * of s: 0, or -1. */
int etcd_set_i64(json_t *o, const char *name, int64_t v);
int etcd_set_bytes(json_t *o, const char *name, const char *s, size_t n);
/* Sets key and range_end for one key, a prefix or [key, end_key): 0 or -1. */
int etcd_set_key_range(json_t *o, const char *key, int prefix, const char *end_key);

#endif
