// libcurl, opened on first use rather than linked: a process that makes no HTTP request (the
// CLI's `token`, the credential helpers) loads none of libcurl's ~30 libraries (TLS, HTTP/2,
// Kerberos, LDAP, IDN…), whose loading and relocation cost more than the rest of its start-up.
//
// curl.h gives the types and constants; every function is called through ag_curl_*, which loads
// libcurl.so.4 (its ABI since 2006) with dlopen on the first call of any of them. curl's own
// names are declared by curl.h but not linked: calling one directly fails at link time. When
// libcurl cannot be loaded, ag_curl_unavailable() says why, ag_curl_easy_init returns NULL and
// the other calls return CURLE_FAILED_INIT (or do nothing).
#ifndef AUTHGATE_CCURL_H
#define AUTHGATE_CCURL_H

#include <curl/curl.h>

/// Why libcurl could not be loaded (dlerror's sentence), or NULL once it is loaded. Loads it.
const char *_Nullable ag_curl_unavailable(void);

CURLcode ag_curl_global_init(long flags);
CURL *_Nullable ag_curl_easy_init(void);
void ag_curl_easy_cleanup(CURL *_Nonnull handle);
void ag_curl_easy_reset(CURL *_Nonnull handle);
CURLcode ag_curl_easy_perform(CURL *_Nonnull handle);
const char *_Nonnull ag_curl_easy_strerror(CURLcode code);
CURLcode ag_curl_easy_send(CURL *_Nonnull handle, const void *_Nonnull buffer, size_t length, size_t *_Nonnull sent);
CURLcode ag_curl_easy_recv(CURL *_Nonnull handle, void *_Nonnull buffer, size_t length, size_t *_Nonnull received);
struct curl_slist *_Nullable ag_curl_slist_append(struct curl_slist *_Nullable list, const char *_Nonnull string);
void ag_curl_slist_free_all(struct curl_slist *_Nullable list);

// Typed forms of the variadic curl_easy_setopt and curl_easy_getinfo, which Swift cannot call.
typedef size_t (*ag_curl_data_callback)(char *_Nonnull data, size_t size, size_t count, void *_Nullable context);

CURLcode ag_curl_setopt_long(CURL *_Nonnull handle, CURLoption option, long value);
CURLcode ag_curl_setopt_string(CURL *_Nonnull handle, CURLoption option, const char *_Nullable value);
/// A curl_off_t option (CURLOPT_INFILESIZE_LARGE): a streamed body's length.
CURLcode ag_curl_setopt_off_t(CURL *_Nonnull handle, CURLoption option, long long value);
CURLcode ag_curl_setopt_pointer(CURL *_Nonnull handle, CURLoption option, void *_Nullable value);
/// A blob option (CURLOPT_CAINFO_BLOB); libcurl copies the bytes.
CURLcode ag_curl_setopt_blob(CURL *_Nonnull handle, CURLoption option, const void *_Nonnull data, size_t length);
CURLcode ag_curl_setopt_headers(CURL *_Nonnull handle, struct curl_slist *_Nullable headers);
CURLcode ag_curl_setopt_callback(CURL *_Nonnull handle, CURLoption option, ag_curl_data_callback _Nullable callback);
/// CURLOPT_SEEKFUNCTION's callback: a streamed body started over (CURL_SEEKFUNC_OK, or
/// CURL_SEEKFUNC_CANTSEEK), for libcurl sending a request again on a new connection.
typedef int (*ag_curl_seek_callback)(void *_Nullable context, curl_off_t offset, int origin);
CURLcode ag_curl_setopt_seek(CURL *_Nonnull handle, ag_curl_seek_callback _Nullable callback);
CURLcode ag_curl_getinfo_long(CURL *_Nonnull handle, CURLINFO info, long *_Nonnull value);
/// CURLINFO_ACTIVESOCKET: the socket of a CURLOPT_CONNECT_ONLY connection, to poll(2) it.
CURLcode ag_curl_getinfo_socket(CURL *_Nonnull handle, CURLINFO info, curl_socket_t *_Nonnull value);

// The multi interface, for the proxy's exchanges: one thread drives every transfer.
CURLM *_Nullable ag_curl_multi_init(void);
void ag_curl_multi_cleanup(CURLM *_Nonnull multi);
CURLMcode ag_curl_multi_add_handle(CURLM *_Nonnull multi, CURL *_Nonnull handle);
CURLMcode ag_curl_multi_remove_handle(CURLM *_Nonnull multi, CURL *_Nonnull handle);
CURLMcode ag_curl_multi_perform(CURLM *_Nonnull multi, int *_Nonnull running);
/// Waits for any transfer's socket, curl's own timeout, `timeout_ms` or ag_curl_multi_wakeup.
CURLMcode ag_curl_multi_poll(CURLM *_Nonnull multi, int timeout_ms);
/// Ends ag_curl_multi_poll's wait: the one multi call any thread may make.
CURLMcode ag_curl_multi_wakeup(CURLM *_Nonnull multi);
CURLMcode ag_curl_multi_setopt_long(CURLM *_Nonnull multi, CURLMoption option, long value);
/// The next transfer that ended: 1 with its handle and result, 0 when none is left.
int ag_curl_multi_next_done(CURLM *_Nonnull multi, CURL *_Nullable *_Nonnull handle, CURLcode *_Nonnull result);
/// Pauses or resumes a transfer (CURLPAUSE_CONT): on the thread driving its multi handle only.
CURLcode ag_curl_easy_pause(CURL *_Nonnull handle, int bitmask);

#endif
