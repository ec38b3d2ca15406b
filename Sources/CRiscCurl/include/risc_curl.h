// Small C helpers around libcurl for risc: curl_easy_setopt and curl_easy_getinfo are
// variadic, so Swift cannot call them; and the write/header callbacks are simplest in C.
#ifndef RISC_CURL_H
#define RISC_CURL_H

#include <stddef.h>
#include <curl/curl.h>

/// A growable byte buffer with a hard cap. When a write would pass the cap, `overflow` is
/// set and the transfer is aborted (the callback returns a short count).
typedef struct risc_curl_buffer {
    char *data;
    size_t length;
    size_t capacity;
    size_t cap;
    int overflow;
} risc_curl_buffer;

void risc_curl_buffer_free(risc_curl_buffer *buffer);

CURLcode risc_curl_set_long(CURL *curl, CURLoption option, long value);
CURLcode risc_curl_set_string(CURL *curl, CURLoption option, const char *value);
CURLcode risc_curl_set_headers(CURL *curl, struct curl_slist *headers);
/// POST body: copied by libcurl (CURLOPT_COPYPOSTFIELDS), so the caller's buffer may go away.
CURLcode risc_curl_set_body(CURL *curl, const char *body, size_t length);
/// Route the response body / header lines into the given buffers.
CURLcode risc_curl_capture(CURL *curl, risc_curl_buffer *body, risc_curl_buffer *headers);

long risc_curl_response_code(CURL *curl);
/// The redirect target of a 3xx response, or NULL (owned by the handle).
const char *risc_curl_redirect_url(CURL *curl);
/// The primary IP address connected to, or NULL (owned by the handle).
const char *risc_curl_primary_ip(CURL *curl);

#endif
