/* fault_http.h: one HTTP POST with a timeout of its own, over libcurl, for
 * the fault suites' load threads (test_sentinel.c, test_election_failover.c).
 * harness_http's timeout is 120 s, too long for a call into a failover,
 * and it logs every call for the contract check, which a load's thousands
 * of calls across faults do not belong in. Header-only (static inline), as
 * fault_util.h; the suite links libcurl and calls curl_global_init in main
 * before its threads start. No Check asserts: load threads call it. */
#ifndef PICKET_FAULT_HTTP_H
#define PICKET_FAULT_HTTP_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* One thread's connection: zero it to start, fault_http_done to end. */
typedef struct {
  CURL *curl;
  struct curl_slist *json; /* Content-Type: application/json */
  char *buf;               /* the last reply's body, NUL-terminated */
  size_t len;
} fault_http;

static inline size_t fault_http_on_data(char *d, size_t size, size_t n, void *ud) {
  fault_http *h = ud;
  char *nb = realloc(h->buf, h->len + size * n + 1);
  if (nb == NULL) return 0;
  memcpy(nb + h->len, d, size * n);
  h->buf = nb;
  h->len += size * n;
  h->buf[h->len] = '\0';
  return size * n;
}

/* POSTs the JSON body to url, at most timeout_ms, and keeps the connection
 * for the next call. *t0 and *t1 get the sent and received times
 * (monotonic ms); code (code_size bytes) the reply's error code, "" when
 * it has none, "transport" when no reply came. Returns the HTTP status (0:
 * no reply) and in *reply the body's JSON (NULL when none; the caller
 * json_decrefs it). */
static inline long fault_http_post(fault_http *h, const char *url, const char *body,
                                   long timeout_ms, int64_t *t0, int64_t *t1, char *code,
                                   size_t code_size, json_t **reply) {
  if (h->curl == NULL) h->curl = curl_easy_init();
  if (h->json == NULL) h->json = curl_slist_append(NULL, "Content-Type: application/json");
  h->len = 0;
  curl_easy_setopt(h->curl, CURLOPT_URL, url);
  curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->json);
  curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
  curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, fault_http_on_data);
  curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, h);
  curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
  code[0] = '\0';
  *reply = NULL;
  *t0 = harness_now_ms();
  CURLcode rc = curl_easy_perform(h->curl);
  *t1 = harness_now_ms();
  long status = 0;
  if (rc != CURLE_OK) {
    snprintf(code, code_size, "transport");
    return 0;
  }
  curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
  json_t *j = json_loadb(h->buf ? h->buf : "", h->len, 0, NULL);
  const char *c = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
  if (c) snprintf(code, code_size, "%s", c);
  *reply = j;
  return status;
}

/* Closes the connection and frees the buffers; h is zeroed for reuse. */
static inline void fault_http_done(fault_http *h) {
  if (h->curl) curl_easy_cleanup(h->curl);
  curl_slist_free_all(h->json);
  free(h->buf);
  memset(h, 0, sizeof *h);
}

#endif
