/* picket_proto.c: the rules of the contract (see include/picket_proto.h).
 * Plain functions over bytes, no allocation, so every component can call
 * them on its hot path and the fuzzer can hammer them. */
#include "picket_proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static const struct {
  const char *code;
  int status;
  const char *message;
} err_table[] = {
#define PICKET_PROTO_ERR_ROW(e, code, status, msg) {code, status, msg},
    PICKET_PROTO_ERROR_MAP(PICKET_PROTO_ERR_ROW)
#undef PICKET_PROTO_ERR_ROW
};

const char *picket_proto_err_code(picket_proto_err e) {
  return (unsigned)e < PICKET_PROTO_ERR_COUNT ? err_table[e].code : "internal_error";
}

int picket_proto_err_status(picket_proto_err e) {
  return (unsigned)e < PICKET_PROTO_ERR_COUNT ? err_table[e].status : 500;
}

const char *picket_proto_err_message(picket_proto_err e) {
  return (unsigned)e < PICKET_PROTO_ERR_COUNT ? err_table[e].message : "internal error";
}

int picket_proto_err_from_code(const char *code) {
  if (code == NULL) return -1;
  for (int i = 0; i < PICKET_PROTO_ERR_COUNT; i++)
    if (strcmp(err_table[i].code, code) == 0) return i;
  return -1;
}

static int name_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == ':' || c == '-';
}

/* "." and ".." are refused although their bytes are name bytes: as a path
 * segment they are dot-segments, which URL libraries (WHATWG URL, Python's
 * urljoin, curl without --path-as-is) remove before sending, so no client
 * could reach such a lock by its name. */
int picket_proto_name_valid(const char *s, size_t len) {
  if (s == NULL || len == 0 || len > PICKET_PROTO_NAME_MAX) return 0;
  if (s[0] == '.' && (len == 1 || (len == 2 && s[1] == '.'))) return 0;
  for (size_t i = 0; i < len; i++)
    if (!name_char((unsigned char)s[i])) return 0;
  return 1;
}

static int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int picket_proto_percent_decode(const char *s, size_t len, char *out, size_t cap) {
  if (s == NULL || cap == 0) return -1;
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '%') {
      if (len - i < 3) return -1;
      int h = hex_value((unsigned char)s[i + 1]), l = hex_value((unsigned char)s[i + 2]);
      if (h < 0 || l < 0) return -1;
      c = (unsigned char)(h << 4 | l);
      i += 2;
    }
    /* Decoded once only: a '%' that came from "%25" is a byte of the
     * text (and then refused by its rule), never decoded again. */
    if (c == '\0' || n + 1 >= cap) return -1;
    out[n++] = (char)c;
  }
  out[n] = '\0';
  return (int)n;
}

int picket_proto_name_from_path(const char *seg, size_t len, char out[PICKET_PROTO_NAME_MAX + 1]) {
  int n = picket_proto_percent_decode(seg, len, out, PICKET_PROTO_NAME_MAX + 1);
  return n >= 0 && picket_proto_name_valid(out, (size_t)n) ? n : -1;
}

int picket_proto_prefix_valid(const char *s, size_t len) {
  if (s == NULL || len > PICKET_PROTO_KEY_PREFIX_MAX) return 0;
  for (size_t i = 0; i < len; i++)
    if (!name_char((unsigned char)s[i])) return 0;
  return 1;
}

int picket_proto_lease_valid(const char *s, size_t len) {
  if (s == NULL || len != PICKET_PROTO_LEASE_LEN) return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
  }
  return 1;
}

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF) without C0/C1
 * controls or DEL, of at most max_bytes bytes and max_chars characters: an
 * owner or a leader's value ends up in logs and JSON replies. An owner's
 * limit counts characters (code points), as JSON Schema's maxLength does,
 * so a client whose validator accepts an owner is never refused by
 * picketd. */
static int text_valid(const char *s, size_t len, size_t max_bytes, size_t max_chars) {
  if (len > max_bytes) return 0;
  if (len > 0 && s == NULL) return 0;
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  for (size_t chars = 1; p < end; chars++) {
    if (chars > max_chars) return 0;
    unsigned char c = *p;
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return 0;
      p++;
      continue;
    }
    int n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) { n = 1; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { n = 2; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { n = 3; cp = c & 0x07; }
    else return 0;
    if (end - p <= n) return 0;
    for (int i = 1; i <= n; i++) {
      if ((p[i] & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
      return 0;
    p += n + 1;
  }
  return 1;
}

int picket_proto_owner_valid(const char *s, size_t len) {
  return text_valid(s, len, PICKET_PROTO_OWNER_BYTES_MAX, PICKET_PROTO_OWNER_MAX);
}

int picket_proto_value_valid(const char *s, size_t len) {
  return text_valid(s, len, PICKET_PROTO_VALUE_BYTES_MAX, PICKET_PROTO_VALUE_BYTES_MAX);
}

int picket_proto_fence_parse(const char *s, size_t len, int64_t *out) {
  if (s == NULL || len == 0 || len > 19 || s[0] == '0') return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  if (v > (uint64_t)INT64_MAX) return 0;
  *out = (int64_t)v;
  return 1;
}

int picket_proto_random(void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom((unsigned char *)buf + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    got += (size_t)r;
  }
  return 0;
}

void picket_proto_lease_format(const unsigned char raw[PICKET_PROTO_LEASE_LEN / 2],
                               char out[PICKET_PROTO_LEASE_LEN + 1]) {
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < PICKET_PROTO_LEASE_LEN / 2; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[PICKET_PROTO_LEASE_LEN] = '\0';
}

int picket_proto_lease_new(char out[PICKET_PROTO_LEASE_LEN + 1]) {
  unsigned char raw[PICKET_PROTO_LEASE_LEN / 2];
  if (picket_proto_random(raw, sizeof raw) < 0) return -1;
  picket_proto_lease_format(raw, out);
  return 0;
}

static int key_fmt(char *buf, size_t cap, const char *prefix, const char *name, const char *suffix) {
  int n = snprintf(buf, cap, "%s{%s}:%s", prefix, name, suffix);
  return (n < 0 || (size_t)n >= cap) ? -1 : n;
}

int picket_proto_key_lease(char *buf, size_t cap, const char *prefix, const char *name) {
  return key_fmt(buf, cap, prefix, name, "lease");
}

int picket_proto_key_fence(char *buf, size_t cap, const char *prefix, const char *name) {
  return key_fmt(buf, cap, prefix, name, "fence");
}

int picket_proto_channel_events(char *buf, size_t cap, const char *prefix, const char *name) {
  return key_fmt(buf, cap, prefix, name, "events");
}

int picket_proto_key_sem(char *buf, size_t cap, const char *prefix, const char *name) {
  return key_fmt(buf, cap, prefix, name, "sem");
}

int picket_proto_key_rw(char *buf, size_t cap, const char *prefix, const char *name) {
  return key_fmt(buf, cap, prefix, name, "rw");
}

int picket_proto_rw_fence_lock(char *buf, size_t cap, const char *name) {
  int n = snprintf(buf, cap, "%s:rw", name);
  return (n < 0 || (size_t)n >= cap || !picket_proto_name_valid(buf, (size_t)n)) ? -1 : n;
}

int picket_proto_sem_fence_lock(char *buf, size_t cap, const char *name, int64_t permit) {
  int n = snprintf(buf, cap, "%s:permit:%lld", name, (long long)permit);
  return (n < 0 || (size_t)n >= cap || !picket_proto_name_valid(buf, (size_t)n)) ? -1 : n;
}

int picket_proto_key_token_leases(char *buf, size_t cap, const char *prefix, const char *token) {
  /* '/' is no lock-name byte: "{/token/x}" is never a lock's hash tag. */
  int n = snprintf(buf, cap, "%s{/token/%s}:leases", prefix, token);
  return (n < 0 || (size_t)n >= cap) ? -1 : n;
}

int picket_proto_channel(char *buf, size_t cap, const char *prefix) {
  int n = snprintf(buf, cap, "%srelease", prefix);
  return (n < 0 || (size_t)n >= cap) ? -1 : n;
}
