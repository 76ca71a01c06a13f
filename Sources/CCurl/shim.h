// Typed wrappers of libcurl's variadic calls, which Swift cannot call directly.
// Only what AuthGateHTTP uses is wrapped.
#ifndef AUTHGATE_CCURL_SHIM_H
#define AUTHGATE_CCURL_SHIM_H

#include <curl/curl.h>

typedef size_t (*ag_curl_data_callback)(char *_Nonnull data, size_t size, size_t count, void *_Nullable context);

static inline CURLcode ag_curl_setopt_long(CURL *_Nonnull handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ag_curl_setopt_string(CURL *_Nonnull handle, CURLoption option, const char *_Nullable value) {
    return curl_easy_setopt(handle, option, value);
}

/// A curl_off_t option (CURLOPT_INFILESIZE_LARGE): a streamed body's length.
static inline CURLcode ag_curl_setopt_off_t(CURL *_Nonnull handle, CURLoption option, long long value) {
    return curl_easy_setopt(handle, option, (curl_off_t)value);
}

static inline CURLcode ag_curl_setopt_pointer(CURL *_Nonnull handle, CURLoption option, void *_Nullable value) {
    return curl_easy_setopt(handle, option, value);
}

/// A blob option (CURLOPT_CAINFO_BLOB); libcurl copies the bytes.
static inline CURLcode ag_curl_setopt_blob(CURL *_Nonnull handle, CURLoption option, const void *_Nonnull data, size_t length) {
    struct curl_blob blob = { (void *)data, length, CURL_BLOB_COPY };
    return curl_easy_setopt(handle, option, &blob);
}

static inline CURLcode ag_curl_setopt_headers(CURL *_Nonnull handle, struct curl_slist *_Nullable headers) {
    return curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
}

static inline CURLcode ag_curl_setopt_callback(CURL *_Nonnull handle, CURLoption option, ag_curl_data_callback _Nullable callback) {
    return curl_easy_setopt(handle, option, callback);
}

static inline CURLcode ag_curl_getinfo_long(CURL *_Nonnull handle, CURLINFO info, long *_Nonnull value) {
    return curl_easy_getinfo(handle, info, value);
}

/// CURLINFO_ACTIVESOCKET: the socket of a CURLOPT_CONNECT_ONLY connection, to poll(2) it.
static inline CURLcode ag_curl_getinfo_socket(CURL *_Nonnull handle, CURLINFO info, curl_socket_t *_Nonnull value) {
    return curl_easy_getinfo(handle, info, value);
}

#endif
