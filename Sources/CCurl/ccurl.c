// libcurl through dlopen: see include/ccurl.h.
#include "ccurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    CURLcode (*easy_perform)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    CURLcode (*easy_send)(CURL *, const void *, size_t, size_t *);
    CURLcode (*easy_recv)(CURL *, void *, size_t, size_t *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_pause)(CURL *, int);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
    CURLMcode (*multi_wakeup)(CURLM *);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
} curl;

static pthread_once_t loading = PTHREAD_ONCE_INIT;
static char failure[512];
static int loaded;

static void *symbol(void *library, const char *name) {
    void *address = dlsym(library, name);
    if (address == NULL && failure[0] == '\0') {
        snprintf(failure, sizeof failure, "libcurl.so.4 has no %s", name);
    }
    return address;
}

static void load(void) {
    // RTLD_LOCAL: libcurl's symbols stay out of the process's global scope.
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        snprintf(failure, sizeof failure, "%s", reason != NULL ? reason : "libcurl.so.4 could not be opened");
        return;
    }
    curl.global_init = (CURLcode (*)(long))symbol(library, "curl_global_init");
    curl.easy_init = (CURL * (*)(void)) symbol(library, "curl_easy_init");
    curl.easy_cleanup = (void (*)(CURL *))symbol(library, "curl_easy_cleanup");
    curl.easy_reset = (void (*)(CURL *))symbol(library, "curl_easy_reset");
    curl.easy_perform = (CURLcode (*)(CURL *))symbol(library, "curl_easy_perform");
    curl.easy_strerror = (const char *(*)(CURLcode))symbol(library, "curl_easy_strerror");
    curl.easy_send = (CURLcode (*)(CURL *, const void *, size_t, size_t *))symbol(library, "curl_easy_send");
    curl.easy_recv = (CURLcode (*)(CURL *, void *, size_t, size_t *))symbol(library, "curl_easy_recv");
    curl.slist_append = (struct curl_slist * (*)(struct curl_slist *, const char *)) symbol(library, "curl_slist_append");
    curl.slist_free_all = (void (*)(struct curl_slist *))symbol(library, "curl_slist_free_all");
    curl.easy_setopt = (CURLcode (*)(CURL *, CURLoption, ...))symbol(library, "curl_easy_setopt");
    curl.easy_getinfo = (CURLcode (*)(CURL *, CURLINFO, ...))symbol(library, "curl_easy_getinfo");
    curl.easy_pause = (CURLcode (*)(CURL *, int))symbol(library, "curl_easy_pause");
    curl.multi_init = (CURLM * (*)(void)) symbol(library, "curl_multi_init");
    curl.multi_cleanup = (CURLMcode (*)(CURLM *))symbol(library, "curl_multi_cleanup");
    curl.multi_add_handle = (CURLMcode (*)(CURLM *, CURL *))symbol(library, "curl_multi_add_handle");
    curl.multi_remove_handle = (CURLMcode (*)(CURLM *, CURL *))symbol(library, "curl_multi_remove_handle");
    curl.multi_perform = (CURLMcode (*)(CURLM *, int *))symbol(library, "curl_multi_perform");
    curl.multi_poll = (CURLMcode (*)(CURLM *, struct curl_waitfd *, unsigned int, int, int *))symbol(library, "curl_multi_poll");
    curl.multi_wakeup = (CURLMcode (*)(CURLM *))symbol(library, "curl_multi_wakeup");
    curl.multi_setopt = (CURLMcode (*)(CURLM *, CURLMoption, ...))symbol(library, "curl_multi_setopt");
    curl.multi_info_read = (CURLMsg * (*)(CURLM *, int *)) symbol(library, "curl_multi_info_read");
    loaded = failure[0] == '\0';
}

static int ready(void) {
    pthread_once(&loading, load);
    return loaded;
}

const char *ag_curl_unavailable(void) { return ready() ? NULL : failure; }

CURLcode ag_curl_global_init(long flags) { return ready() ? curl.global_init(flags) : CURLE_FAILED_INIT; }
CURL *ag_curl_easy_init(void) { return ready() ? curl.easy_init() : NULL; }
void ag_curl_easy_cleanup(CURL *handle) {
    if (ready()) curl.easy_cleanup(handle);
}
void ag_curl_easy_reset(CURL *handle) {
    if (ready()) curl.easy_reset(handle);
}
CURLcode ag_curl_easy_perform(CURL *handle) { return ready() ? curl.easy_perform(handle) : CURLE_FAILED_INIT; }
const char *ag_curl_easy_strerror(CURLcode code) {
    return ready() ? curl.easy_strerror(code) : "libcurl is not loaded";
}
CURLcode ag_curl_easy_send(CURL *handle, const void *buffer, size_t length, size_t *sent) {
    return ready() ? curl.easy_send(handle, buffer, length, sent) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_easy_recv(CURL *handle, void *buffer, size_t length, size_t *received) {
    return ready() ? curl.easy_recv(handle, buffer, length, received) : CURLE_FAILED_INIT;
}
struct curl_slist *ag_curl_slist_append(struct curl_slist *list, const char *string) {
    return ready() ? curl.slist_append(list, string) : NULL;
}
void ag_curl_slist_free_all(struct curl_slist *list) {
    if (ready()) curl.slist_free_all(list);
}

CURLcode ag_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return ready() ? curl.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return ready() ? curl.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_setopt_off_t(CURL *handle, CURLoption option, long long value) {
    return ready() ? curl.easy_setopt(handle, option, (curl_off_t)value) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return ready() ? curl.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_setopt_blob(CURL *handle, CURLoption option, const void *data, size_t length) {
    struct curl_blob blob = {(void *)data, length, CURL_BLOB_COPY};
    return ready() ? curl.easy_setopt(handle, option, &blob) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_setopt_headers(CURL *handle, struct curl_slist *headers) {
    return ready() ? curl.easy_setopt(handle, CURLOPT_HTTPHEADER, headers) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_setopt_callback(CURL *handle, CURLoption option, ag_curl_data_callback callback) {
    return ready() ? curl.easy_setopt(handle, option, callback) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_setopt_seek(CURL *handle, ag_curl_seek_callback callback) {
    return ready() ? curl.easy_setopt(handle, CURLOPT_SEEKFUNCTION, callback) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return ready() ? curl.easy_getinfo(handle, info, value) : CURLE_FAILED_INIT;
}
CURLcode ag_curl_getinfo_socket(CURL *handle, CURLINFO info, curl_socket_t *value) {
    return ready() ? curl.easy_getinfo(handle, info, value) : CURLE_FAILED_INIT;
}

CURLcode ag_curl_easy_pause(CURL *handle, int bitmask) { return ready() ? curl.easy_pause(handle, bitmask) : CURLE_FAILED_INIT; }
CURLM *ag_curl_multi_init(void) { return ready() ? curl.multi_init() : NULL; }
void ag_curl_multi_cleanup(CURLM *multi) {
    if (ready()) curl.multi_cleanup(multi);
}
CURLMcode ag_curl_multi_add_handle(CURLM *multi, CURL *handle) {
    return ready() ? curl.multi_add_handle(multi, handle) : CURLM_INTERNAL_ERROR;
}
CURLMcode ag_curl_multi_remove_handle(CURLM *multi, CURL *handle) {
    return ready() ? curl.multi_remove_handle(multi, handle) : CURLM_INTERNAL_ERROR;
}
CURLMcode ag_curl_multi_perform(CURLM *multi, int *running) {
    return ready() ? curl.multi_perform(multi, running) : CURLM_INTERNAL_ERROR;
}
CURLMcode ag_curl_multi_poll(CURLM *multi, int timeout_ms) {
    return ready() ? curl.multi_poll(multi, NULL, 0, timeout_ms, NULL) : CURLM_INTERNAL_ERROR;
}
CURLMcode ag_curl_multi_wakeup(CURLM *multi) { return ready() ? curl.multi_wakeup(multi) : CURLM_INTERNAL_ERROR; }
CURLMcode ag_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return ready() ? curl.multi_setopt(multi, option, value) : CURLM_INTERNAL_ERROR;
}
int ag_curl_multi_next_done(CURLM *multi, CURL **handle, CURLcode *result) {
    if (!ready()) return 0;
    int left = 0;
    CURLMsg *message;
    while ((message = curl.multi_info_read(multi, &left)) != NULL) {
        if (message->msg == CURLMSG_DONE) {
            *handle = message->easy_handle;
            *result = message->data.result;
            return 1;
        }
    }
    return 0;
}
