#include "risc_curl.h"
#include <stdlib.h>
#include <string.h>

void risc_curl_buffer_free(risc_curl_buffer *buffer) {
    free(buffer->data);
    buffer->data = NULL;
    buffer->length = buffer->capacity = 0;
}

static size_t append(char *ptr, size_t size, size_t nmemb, void *userdata) {
    risc_curl_buffer *buffer = userdata;
    size_t n = size * nmemb;
    if (buffer->length + n > buffer->cap) {
        buffer->overflow = 1;
        return 0;  // abort the transfer: CURLE_WRITE_ERROR
    }
    if (buffer->length + n + 1 > buffer->capacity) {
        size_t want = buffer->capacity == 0 ? 4096 : buffer->capacity * 2;
        while (want < buffer->length + n + 1) want *= 2;
        char *grown = realloc(buffer->data, want);
        if (grown == NULL) return 0;
        buffer->data = grown;
        buffer->capacity = want;
    }
    memcpy(buffer->data + buffer->length, ptr, n);
    buffer->length += n;
    buffer->data[buffer->length] = 0;
    return n;
}

CURLcode risc_curl_set_long(CURL *curl, CURLoption option, long value) { return curl_easy_setopt(curl, option, value); }
CURLcode risc_curl_set_string(CURL *curl, CURLoption option, const char *value) { return curl_easy_setopt(curl, option, value); }
CURLcode risc_curl_set_headers(CURL *curl, struct curl_slist *headers) { return curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers); }

CURLcode risc_curl_set_body(CURL *curl, const char *body, size_t length) {
    CURLcode rc = curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)length);
    if (rc != CURLE_OK) return rc;
    return curl_easy_setopt(curl, CURLOPT_COPYPOSTFIELDS, body);
}

CURLcode risc_curl_capture(CURL *curl, risc_curl_buffer *body, risc_curl_buffer *headers) {
    CURLcode rc = curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
    if (rc == CURLE_OK) rc = curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
    if (rc == CURLE_OK) rc = curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, append);
    if (rc == CURLE_OK) rc = curl_easy_setopt(curl, CURLOPT_HEADERDATA, headers);
    return rc;
}

long risc_curl_response_code(CURL *curl) {
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

const char *risc_curl_redirect_url(CURL *curl) {
    char *url = NULL;
    curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &url);
    return url;
}

const char *risc_curl_primary_ip(CURL *curl) {
    char *ip = NULL;
    curl_easy_getinfo(curl, CURLINFO_PRIMARY_IP, &ip);
    return ip;
}
