/* etcd_json.c: the etcd JSON gateway's encoding (see etcd_json.h): what
 * every call of etcd_client.c writes and reads, in one place. */
#include "etcd_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- base64 (RFC 4648, with padding: what the gateway reads and writes) -- */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* A malloc'd base64 text of n bytes of s, or NULL (out of memory). */
char *etcd_b64_encode(const char *s, size_t n) {
  char *out = malloc((n + 2) / 3 * 4 + 1);
  if (out == NULL) return NULL;
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16;
    if (i + 1 < n) v |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n) v |= p[i + 2];
    out[o++] = b64chars[v >> 18 & 63];
    out[o++] = b64chars[v >> 12 & 63];
    out[o++] = i + 1 < n ? b64chars[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? b64chars[v & 63] : '=';
  }
  out[o] = '\0';
  return out;
}

static int b64_value(char ch) {
  const char *p = ch ? strchr(b64chars, ch) : NULL;
  return p ? (int)(p - b64chars) : -1;
}

/* Decodes base64 text s into a malloc'd, NUL-terminated buffer; its length
 * in *len. NULL when s is not base64 (or memory ran out). */
char *etcd_b64_decode(const char *s, size_t *len) {
  size_t n = strlen(s);
  if (n % 4 != 0) return NULL;
  char *out = malloc(n / 4 * 3 + 1);
  if (out == NULL) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    int v[4];
    for (int k = 0; k < 4; k++) {
      /* '=' only as the last one or two characters of the text */
      v[k] = s[i + k] == '=' && i + 4 == n && k >= 2 ? 0 : b64_value(s[i + k]);
      if (v[k] < 0 || (k == 2 && s[i + 2] == '=' && s[i + 3] != '=')) {
        free(out);
        return NULL;
      }
    }
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    out[o++] = (char)(w >> 16);
    if (s[i + 2] != '=') out[o++] = (char)(w >> 8 & 255);
    if (s[i + 3] != '=') out[o++] = (char)(w & 255);
  }
  out[o] = '\0';
  *len = o;
  return out;
}

/* ---- JSON helpers --------------------------------------------------------- */

/* A 64-bit number of the gateway: a string of digits (how it writes them)
 * or a JSON integer; absent is 0 (the gateway leaves zero values out).
 * Returns 0, or -1 when the member is something else. */
int etcd_j_i64(const json_t *o, const char *name, int64_t *out) {
  const json_t *v = json_object_get(o, name);
  *out = 0;
  if (v == NULL || json_is_null(v)) return 0;
  if (json_is_integer(v)) {
    *out = (int64_t)json_integer_value(v);
    return 0;
  }
  const char *s = json_string_value(v);
  if (s == NULL || *s == '\0') return -1;
  char *end;
  errno = 0;
  long long n = strtoll(s, &end, 10);
  if (errno || *end) return -1;
  *out = n;
  return 0;
}

/* The same for the unsigned 64-bit member and cluster ids. */
int etcd_j_u64(const json_t *o, const char *name, uint64_t *out) {
  const json_t *v = json_object_get(o, name);
  *out = 0;
  if (v == NULL || json_is_null(v)) return 0;
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  const char *s = json_string_value(v);
  if (s == NULL || *s == '\0' || *s == '-') return -1;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(s, &end, 10);
  if (errno || *end) return -1;
  *out = n;
  return 0;
}

int etcd_j_bool(const json_t *o, const char *name) {
  return json_is_true(json_object_get(o, name));
}

/* Sets o[name] to a number as the gateway's decimal string; 0 or -1. */
int etcd_set_i64(json_t *o, const char *name, int64_t v) {
  char s[24];
  snprintf(s, sizeof s, "%lld", (long long)v);
  return json_object_set_new(o, name, json_string(s));
}

/* Sets o[name] to the base64 of n bytes of s; 0 or -1. */
int etcd_set_bytes(json_t *o, const char *name, const char *s, size_t n) {
  char *b = etcd_b64_encode(s, n);
  int rc = b ? json_object_set_new(o, name, json_string(b)) : -1;
  free(b);
  return rc;
}

/* Sets key and range_end: `end` when given (the range [key, end)), else
 * with prefix the key just above every key that starts with `prefix_of`
 * (its last byte below 0xff plus one; "\0", all keys, when there is none),
 * else none (the one key). 0 or -1. */
int etcd_set_key_range(json_t *o, const char *key, int prefix, const char *end_key) {
  size_t n = strlen(key);
  if (etcd_set_bytes(o, "key", key, n) < 0) return -1;
  if (end_key) return etcd_set_bytes(o, "range_end", end_key, strlen(end_key));
  if (!prefix) return 0;
  size_t m = n;
  while (m > 0 && (unsigned char)key[m - 1] == 0xff) m--;
  if (m == 0) return etcd_set_bytes(o, "range_end", "", 1);
  char *end = malloc(m);
  if (end == NULL) return -1;
  memcpy(end, key, m);
  end[m - 1] = (char)((unsigned char)end[m - 1] + 1);
  int rc = etcd_set_bytes(o, "range_end", end, m);
  free(end);
  return rc;
}

/* A bytes member decoded ("" when absent); 0, or -1 when not base64. */
int etcd_j_bytes(const json_t *o, const char *name, char **out, size_t *len) {
  const json_t *v = json_object_get(o, name);
  *out = NULL;
  if (v != NULL && !json_is_string(v)) return -1;
  *out = etcd_b64_decode(v ? json_string_value(v) : "", len);
  return *out ? 0 : -1;
}

