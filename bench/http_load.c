/*
 * http_load.c - a cheap closed-loop HTTP/1.1 load generator on keep-alive connections.
 *
 * Usage: http_load (--port PORT | --unix PATH) --connections C --seconds S
 *                  [--path /PATH] [--threads T]
 *
 * Opens C connections to 127.0.0.1:PORT (or the Unix socket PATH) and runs each
 * as a closed loop: send
 *
 *     GET PATH HTTP/1.1\r\nHost: x\r\n\r\n
 *
 * then read the whole response (its body by Content-Length, by the chunked
 * encoding, or to the end of the connection when it has neither), then send the
 * next request on the same connection.  Latency runs from just before the send
 * to the response's last byte; connecting is not timed.  A response that says
 * "Connection: close" (or whose body runs to the end) is counted, and the
 * client goes on with a new connection (counted under "reconnects").
 *
 * The connections are spread over T threads (default 1); each thread runs its
 * clients as non-blocking state machines on its own epoll instance, as
 * bench/load.c does.
 *
 * A response with a status other than 2xx or 3xx counts as an error (and under
 * "status_errors"), as does any failure to connect, send or read (the client
 * then starts over on a new connection; a refused connect is retried after
 * 1 ms and counted under "retries").  Requests still in flight at the deadline
 * are not counted.
 *
 * Prints one line of JSON on stdout at the end:
 *   {"requests":R,"errors":E,"status_errors":X,"retries":Y,"reconnects":N,
 *    "seconds":S,"requests_per_second":Q,"body_bytes":B,"mean_us":M,
 *    "p50_us":A,"p90_us":B,"p99_us":C,"p999_us":D,"max_us":E,
 *    "cpu_us_per_request":U,"histogram":[[UPPER_US,COUNT],...]}
 * where the percentiles come from 1-microsecond buckets up to 1 s, U is the
 * generator's own CPU time (user + system) per request, and "histogram" lists
 * the non-empty buckets of a coarser histogram whose bounds grow by a quarter
 * power of two (UPPER_US is a bucket's inclusive upper bound).
 *
 * Exit status: 0 on success, 1 on a system failure, 2 on bad usage.
 *
 * Build: cc -O2 -Wall -Wextra -std=gnu11 -o http_load http_load.c -lpthread
 */

#define _GNU_SOURCE   /* for memmem(), strncasecmp() */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum {
    HISTOGRAM_LIMIT_US = 1000000,   /* 1-microsecond buckets up to 1 second */
    HISTOGRAM_BUCKETS = HISTOGRAM_LIMIT_US + 1,   /* plus one overflow bucket */
    BUFFER_SIZE = 64 * 1024,        /* a response's head must fit in it */
    MAX_EVENTS = 256,
    RETRY_PAUSE_MS = 1,
    MAX_WAIT_MS = 100,
};

/* Where a client is in its request loop. */
enum client_state {
    STATE_PAUSED,       /* waiting to (re)try connecting on the next iteration */
    STATE_CONNECTING,   /* connect() in progress, waiting for EPOLLOUT */
    STATE_SENDING,      /* request partly sent, waiting for EPOLLOUT */
    STATE_READING,      /* request sent, reading the response */
};

/* Where the reading of a response is. */
enum phase {
    PHASE_HEAD,         /* status line and headers, up to the empty line */
    PHASE_BODY,         /* `remaining` bytes of a Content-Length body */
    PHASE_CHUNK_SIZE,   /* a chunk's size line */
    PHASE_CHUNK_DATA,   /* `remaining` bytes: the chunk's data and its CRLF */
    PHASE_TRAILERS,     /* trailer lines after the last chunk, up to the empty line */
    PHASE_UNTIL_CLOSE,  /* a body with neither length nor chunks: to the end */
};

/* One simulated client. */
struct client {
    struct worker *worker;
    enum client_state state;
    enum phase phase;
    int fd;                   /* -1 when there is no connection */
    uint32_t watched_events;  /* events registered with epoll; 0 if none */
    int64_t start_ns;         /* when the current request was sent */
    size_t sent;              /* bytes of the request sent so far */
    int status;               /* the response's status code */
    bool close_after;         /* the response said Connection: close */
    uint64_t remaining;       /* bytes left of the body or the chunk */
    size_t used;              /* bytes in buffer not yet consumed */
    char buffer[BUFFER_SIZE];
};

/* One thread with its clients, epoll instance and statistics. */
struct worker {
    pthread_t thread;
    int epoll_fd;
    struct client *clients;
    int client_count;
    uint64_t requests;
    uint64_t errors;
    uint64_t status_errors;
    uint64_t retries;
    uint64_t reconnects;
    uint64_t body_bytes;
    uint64_t max_us;
    uint64_t total_ns;
    uint64_t *histogram;      /* HISTOGRAM_BUCKETS counters */
};

/* Settings shared (read-only) by all threads. */
static struct sockaddr_storage server_address;
static socklen_t server_address_length;
static char *request;
static size_t request_length;
static int64_t deadline_ns;

/* Prints a message with errno's description and exits with status 1. */
static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* Returns the CLOCK_MONOTONIC time in nanoseconds. */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Returns true if time t is before the deadline, so its outcome counts. */
static bool counts(int64_t t)
{
    return t < deadline_ns;
}

/* Makes epoll watch exactly `events` on the client's socket (0: not at all). */
static void watch(struct client *c, uint32_t events)
{
    if (events == c->watched_events)
        return;
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = events;
    event.data.ptr = c;
    int op = c->watched_events == 0 ? EPOLL_CTL_ADD
           : events == 0            ? EPOLL_CTL_DEL
                                    : EPOLL_CTL_MOD;
    if (epoll_ctl(c->worker->epoll_fd, op, c->fd, &event) < 0)
        die("epoll_ctl");
    c->watched_events = events;
}

/* Closes the client's connection, if any (which also removes it from epoll). */
static void disconnect(struct client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->watched_events = 0;
}

/* Records one failed request, drops the connection and schedules a new one. */
static void fail(struct client *c)
{
    if (counts(now_ns()))
        c->worker->errors++;
    disconnect(c);
    c->state = STATE_PAUSED;
}

/* Sends the rest of the request; then waits for the response (or for EPOLLOUT). */
static void send_rest(struct client *c)
{
    while (c->sent < request_length) {
        ssize_t n = send(c->fd, request + c->sent, request_length - c->sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->state = STATE_SENDING;
                watch(c, EPOLLOUT);
                return;
            }
            fail(c);
            return;
        }
        c->sent += (size_t)n;
    }
    c->state = STATE_READING;
    watch(c, EPOLLIN);
}

/* Starts a request on the client's (connected) socket. */
static void begin_send(struct client *c)
{
    c->start_ns = now_ns();
    c->sent = 0;
    c->used = 0;
    c->phase = PHASE_HEAD;
    c->status = 0;
    c->close_after = false;
    send_rest(c);
}

/* Tries to open a new connection; on success goes on to send the request. */
static void begin_connect(struct client *c)
{
    int family = server_address.ss_family;
    c->fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        fail(c);
        return;
    }
    if (family == AF_INET) {
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (connect(c->fd, (struct sockaddr *)&server_address, server_address_length) == 0) {
        begin_send(c);
        return;
    }
    if (errno == EINPROGRESS) {
        c->state = STATE_CONNECTING;
        watch(c, EPOLLOUT);
        return;
    }
    if (errno == EAGAIN || errno == ECONNREFUSED) {
        if (counts(now_ns()))
            c->worker->retries++;
        disconnect(c);
        c->state = STATE_PAUSED;
        return;
    }
    fail(c);
}

/* Finishes a connect() that was in progress, then sends the request. */
static void finish_connect(struct client *c)
{
    int error = 0;
    socklen_t length = sizeof error;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &error, &length) < 0)
        error = errno;
    if (error == 0) {
        begin_send(c);
    } else if (error == EAGAIN || error == ECONNREFUSED) {
        if (counts(now_ns()))
            c->worker->retries++;
        disconnect(c);
        c->state = STATE_PAUSED;
    } else {
        fail(c);
    }
}

/* Counts a complete response and starts the client's next request. */
static void complete(struct client *c)
{
    int64_t end = now_ns();
    struct worker *w = c->worker;
    if (counts(end)) {
        if (c->status >= 200 && c->status < 400) {
            w->requests++;
            int64_t latency_ns = end - c->start_ns;
            uint64_t us = latency_ns > 0 ? (uint64_t)latency_ns / 1000 : 0;
            w->histogram[us < HISTOGRAM_LIMIT_US ? us : HISTOGRAM_LIMIT_US]++;
            w->total_ns += (uint64_t)latency_ns;
            if (us > w->max_us)
                w->max_us = us;
        } else {
            w->errors++;
            w->status_errors++;
        }
    }
    if (c->close_after || c->phase == PHASE_UNTIL_CLOSE) {
        if (counts(end))
            w->reconnects++;
        disconnect(c);
        begin_connect(c);
    } else {
        begin_send(c);
    }
}

/* Returns the header's value when `line` (of `length` bytes, no CRLF) is header `name`. */
static const char *header_value(const char *line, size_t length, const char *name, size_t *value_length)
{
    size_t name_length = strlen(name);
    if (length <= name_length || line[name_length] != ':' || strncasecmp(line, name, name_length) != 0)
        return NULL;
    const char *value = line + name_length + 1;
    const char *end = line + length;
    while (value < end && (*value == ' ' || *value == '\t'))
        value++;
    *value_length = (size_t)(end - value);
    return value;
}

/* Returns true when the comma-separated `value` holds `token` (case-insensitive). */
static bool has_token(const char *value, size_t length, const char *token)
{
    size_t token_length = strlen(token);
    for (size_t i = 0; i + token_length <= length; i++)
        if (strncasecmp(value + i, token, token_length) == 0)
            return true;
    return false;
}

/* Parses the head in buffer[0, length) (ending with the empty line); returns false when it
 * is not a response. Sets the status, the body's phase and whether the connection closes. */
static bool parse_head(struct client *c, const char *head, size_t length)
{
    if (length < 12 || memcmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ')
        return false;
    c->status = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
    bool chunked = false, has_length = false;
    uint64_t content_length = 0;
    c->close_after = head[7] == '0';   /* HTTP/1.0 closes unless it says keep-alive */
    const char *line = memchr(head, '\n', length);
    while (line != NULL) {
        line++;
        const char *end = memchr(line, '\n', (size_t)(head + length - line));
        if (end == NULL)
            break;
        size_t line_length = (size_t)(end - line);
        if (line_length > 0 && line[line_length - 1] == '\r')
            line_length--;
        size_t value_length;
        const char *value;
        if ((value = header_value(line, line_length, "content-length", &value_length)) != NULL) {
            has_length = true;
            content_length = strtoull(value, NULL, 10);
        } else if ((value = header_value(line, line_length, "transfer-encoding", &value_length)) != NULL) {
            chunked = has_token(value, value_length, "chunked");
        } else if ((value = header_value(line, line_length, "connection", &value_length)) != NULL) {
            if (has_token(value, value_length, "close"))
                c->close_after = true;
            else if (has_token(value, value_length, "keep-alive"))
                c->close_after = false;
        }
        line = end;
    }
    if ((c->status >= 100 && c->status < 200) || c->status == 204 || c->status == 304) {
        c->phase = PHASE_HEAD;   /* no body; an interim response is followed by the real one */
        c->remaining = 0;
    } else if (chunked) {
        c->phase = PHASE_CHUNK_SIZE;
    } else if (has_length) {
        c->phase = PHASE_BODY;
        c->remaining = content_length;
    } else {
        c->phase = PHASE_UNTIL_CLOSE;
    }
    return true;
}

/* Consumes what the buffer holds of the response; completes it at its end (and goes on
 * with the next request). Returns false when the client failed. */
static bool consume(struct client *c)
{
    size_t position = 0;
    for (;;) {
        char *data = c->buffer + position;
        size_t available = c->used - position;
        switch (c->phase) {
        case PHASE_HEAD: {
            char *end = memmem(data, available, "\r\n\r\n", 4);
            if (end == NULL)
                goto more;
            size_t head_length = (size_t)(end - data) + 4;
            if (!parse_head(c, data, head_length)) {
                fail(c);
                return false;
            }
            position += head_length;
            if (c->status >= 100 && c->status < 200)
                continue;   /* interim: the real response follows */
            if (c->phase == PHASE_HEAD || (c->phase == PHASE_BODY && c->remaining == 0))
                goto done;
            continue;
        }
        case PHASE_BODY:
        case PHASE_CHUNK_DATA: {
            size_t take = available < c->remaining ? available : (size_t)c->remaining;
            position += take;
            c->remaining -= take;
            if (counts(now_ns()))
                c->worker->body_bytes += take;
            if (c->remaining > 0)
                goto more;
            if (c->phase == PHASE_BODY)
                goto done;
            c->phase = PHASE_CHUNK_SIZE;
            continue;
        }
        case PHASE_CHUNK_SIZE: {
            char *end = memmem(data, available, "\r\n", 2);
            if (end == NULL)
                goto more;
            char *after;
            unsigned long long size = strtoull(data, &after, 16);
            if (after == data) {
                fail(c);
                return false;
            }
            position += (size_t)(end - data) + 2;
            if (size == 0) {
                c->phase = PHASE_TRAILERS;
            } else {
                c->phase = PHASE_CHUNK_DATA;
                c->remaining = size + 2;   /* the data and its CRLF */
            }
            continue;
        }
        case PHASE_TRAILERS: {
            char *end = memmem(data, available, "\r\n", 2);
            if (end == NULL)
                goto more;
            position += (size_t)(end - data) + 2;
            if (end == data)
                goto done;
            continue;
        }
        case PHASE_UNTIL_CLOSE:
            position = c->used;
            goto more;
        }
    }
more:
    /* Keep what is not consumed yet (a partial line or head) at the front. */
    if (position > 0) {
        memmove(c->buffer, c->buffer + position, c->used - position);
        c->used -= position;
    }
    if (c->used == sizeof c->buffer) {   /* a head or a line too long for the buffer */
        fail(c);
        return false;
    }
    return true;
done:
    if (position != c->used) {   /* bytes after the response: nothing was asked for */
        fail(c);
        return false;
    }
    complete(c);
    return true;
}

/* Reads what is available of the response (once: epoll reports the rest). */
static void read_response(struct client *c)
{
    ssize_t n = read(c->fd, c->buffer + c->used, sizeof c->buffer - c->used);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n == 0 && c->phase == PHASE_UNTIL_CLOSE) {
        complete(c);
        return;
    }
    if (n <= 0) {                    /* closed or reset before the response's end */
        fail(c);
        return;
    }
    c->used += (size_t)n;
    consume(c);
}

/* Handles one epoll event for a client according to its state. */
static void handle_event(struct client *c, uint32_t events)
{
    switch (c->state) {
    case STATE_CONNECTING:
        finish_connect(c);
        break;
    case STATE_SENDING:
        if (events & (EPOLLERR | EPOLLHUP))
            fail(c);
        else
            send_rest(c);
        break;
    case STATE_READING:
        read_response(c);
        break;
    case STATE_PAUSED:
        break;                       /* stale event for a closed socket */
    }
}

/* Runs one thread's clients until the deadline. */
static void *run_worker(void *argument)
{
    struct worker *w = argument;
    struct epoll_event events[MAX_EVENTS];

    for (int i = 0; i < w->client_count; i++)
        begin_connect(&w->clients[i]);

    for (;;) {
        int64_t now = now_ns();
        if (now >= deadline_ns)
            break;

        /* Retry the clients whose connect was refused or failed. */
        bool paused = false;
        for (int i = 0; i < w->client_count; i++) {
            struct client *c = &w->clients[i];
            if (c->state == STATE_PAUSED) {
                begin_connect(c);
                if (c->state == STATE_PAUSED)
                    paused = true;
            }
        }

        int64_t remaining_ms = (deadline_ns - now + 999999) / 1000000;
        int timeout = paused ? RETRY_PAUSE_MS
                    : remaining_ms < MAX_WAIT_MS ? (int)remaining_ms : MAX_WAIT_MS;
        int count = epoll_wait(w->epoll_fd, events, MAX_EVENTS, timeout);
        if (count < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < count; i++)
            handle_event(events[i].data.ptr, events[i].events);
    }

    for (int i = 0; i < w->client_count; i++)
        disconnect(&w->clients[i]);
    return NULL;
}

/* Returns the smallest latency (us) at or below which `fraction` of samples lie. */
static uint64_t percentile(const uint64_t *histogram, uint64_t total, double fraction,
                           uint64_t max_us)
{
    if (total == 0)
        return 0;
    uint64_t rank = (uint64_t)(fraction * (double)total);
    if ((double)rank < fraction * (double)total)
        rank++;                      /* ceiling */
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (uint64_t us = 0; us < HISTOGRAM_LIMIT_US; us++) {
        seen += histogram[us];
        if (seen >= rank)
            return us;
    }
    return max_us;                   /* falls in the overflow bucket */
}

/* Prints the usage message and exits with status 2. */
static void usage(void)
{
    fprintf(stderr,
            "usage: http_load (--port PORT | --unix PATH) --connections C --seconds S\n"
            "                 [--path /PATH] [--threads T]\n");
    exit(2);
}

/* Parses a positive integer option value, or exits with the usage message. */
static int parse_count(const char *text, long limit)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < 1 || value > limit)
        usage();
    return (int)value;
}

/* Parses the options, runs the workers and prints the JSON summary. */
int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"port", required_argument, NULL, 'p'},
        {"unix", required_argument, NULL, 'u'},
        {"path", required_argument, NULL, 'P'},
        {"connections", required_argument, NULL, 'c'},
        {"seconds", required_argument, NULL, 'S'},
        {"threads", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    const char *unix_path = NULL, *path = "/";
    int port = 0, client_count = 0, thread_count = 1;
    double seconds = 0;

    int option;
    while ((option = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (option) {
        case 'p': port = parse_count(optarg, 65535); break;
        case 'u': unix_path = optarg; break;
        case 'P': path = optarg; break;
        case 'c': client_count = parse_count(optarg, 100000); break;
        case 't': thread_count = parse_count(optarg, 1024); break;
        case 'S': {
            char *end;
            seconds = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(seconds > 0) || seconds > 1e6)
                usage();
            break;
        }
        default: usage();
        }
    }
    if (optind != argc || (port == 0) == (unix_path == NULL) || client_count == 0 || seconds == 0 ||
        path[0] != '/' || strpbrk(path, " \r\n") != NULL)
        usage();

    memset(&server_address, 0, sizeof server_address);
    if (unix_path != NULL) {
        struct sockaddr_un *address = (struct sockaddr_un *)&server_address;
        address->sun_family = AF_UNIX;
        if (strlen(unix_path) >= sizeof address->sun_path) {
            fprintf(stderr, "http_load: socket path too long: %s\n", unix_path);
            exit(2);
        }
        strcpy(address->sun_path, unix_path);
        server_address_length = sizeof *address;
    } else {
        struct sockaddr_in *address = (struct sockaddr_in *)&server_address;
        address->sin_family = AF_INET;
        address->sin_port = htons((uint16_t)port);
        address->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        server_address_length = sizeof *address;
    }

    size_t size = strlen(path) + 64;
    request = malloc(size);
    if (request == NULL)
        die("malloc");
    request_length = (size_t)snprintf(request, size, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);

    signal(SIGPIPE, SIG_IGN);
    if (thread_count > client_count)
        thread_count = client_count;

    /* Spread the clients over the threads as evenly as possible. */
    struct worker *workers = calloc((size_t)thread_count, sizeof *workers);
    if (workers == NULL)
        die("calloc");
    for (int t = 0; t < thread_count; t++) {
        struct worker *w = &workers[t];
        w->client_count = client_count / thread_count + (t < client_count % thread_count);
        w->clients = calloc((size_t)w->client_count, sizeof *w->clients);
        w->histogram = calloc(HISTOGRAM_BUCKETS, sizeof *w->histogram);
        if (w->clients == NULL || w->histogram == NULL)
            die("calloc");
        w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (w->epoll_fd < 0)
            die("epoll_create1");
        for (int i = 0; i < w->client_count; i++) {
            w->clients[i].worker = w;
            w->clients[i].fd = -1;
        }
    }

    int64_t start_ns = now_ns();
    deadline_ns = start_ns + (int64_t)(seconds * 1e9);
    for (int t = 0; t < thread_count; t++) {
        int error = pthread_create(&workers[t].thread, NULL, run_worker, &workers[t]);
        if (error != 0) {
            errno = error;
            die("pthread_create");
        }
    }
    for (int t = 0; t < thread_count; t++)
        pthread_join(workers[t].thread, NULL);
    int64_t end_ns = now_ns();

    /* Merge the per-thread statistics into the first worker's. */
    struct worker *total = &workers[0];
    for (int t = 1; t < thread_count; t++) {
        struct worker *w = &workers[t];
        total->requests += w->requests;
        total->errors += w->errors;
        total->status_errors += w->status_errors;
        total->retries += w->retries;
        total->reconnects += w->reconnects;
        total->body_bytes += w->body_bytes;
        total->total_ns += w->total_ns;
        if (w->max_us > total->max_us)
            total->max_us = w->max_us;
        for (int b = 0; b < HISTOGRAM_BUCKETS; b++)
            total->histogram[b] += w->histogram[b];
    }

    double elapsed = (double)(end_ns - start_ns) / 1e9;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu_us = (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6
                  + (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
    uint64_t n = total->requests;
    printf("{\"requests\":%llu,\"errors\":%llu,\"status_errors\":%llu,\"retries\":%llu,"
           "\"reconnects\":%llu,\"seconds\":%.4f,\"requests_per_second\":%.1f,"
           "\"body_bytes\":%llu,\"mean_us\":%.1f,\"p50_us\":%llu,\"p90_us\":%llu,"
           "\"p99_us\":%llu,\"p999_us\":%llu,\"max_us\":%llu,\"cpu_us_per_request\":%.2f,"
           "\"histogram\":[",
           (unsigned long long)n, (unsigned long long)total->errors,
           (unsigned long long)total->status_errors, (unsigned long long)total->retries,
           (unsigned long long)total->reconnects, elapsed, (double)n / elapsed,
           (unsigned long long)total->body_bytes,
           n ? (double)total->total_ns / (double)n / 1000 : 0.0,
           (unsigned long long)percentile(total->histogram, n, 0.50, total->max_us),
           (unsigned long long)percentile(total->histogram, n, 0.90, total->max_us),
           (unsigned long long)percentile(total->histogram, n, 0.99, total->max_us),
           (unsigned long long)percentile(total->histogram, n, 0.999, total->max_us),
           (unsigned long long)total->max_us, n ? cpu_us / (double)n : 0.0);
    /* The coarse histogram: buckets [previous bound + 1, bound], the bounds growing by
     * 2^(1/4) from 1 us, the last one holding everything from 1 s on (bound: the maximum). */
    bool first = true;
    uint64_t low = 0;
    for (double bound = 1; low <= HISTOGRAM_LIMIT_US; bound *= 1.189207115) {
        uint64_t high = (uint64_t)bound;
        if (high < low)
            continue;
        if (high >= HISTOGRAM_LIMIT_US)
            high = HISTOGRAM_LIMIT_US;
        uint64_t count = 0;
        for (uint64_t us = low; us <= high; us++)
            count += total->histogram[us];
        if (count > 0) {
            printf("%s[%llu,%llu]", first ? "" : ",",
                   (unsigned long long)(high == HISTOGRAM_LIMIT_US ? total->max_us : high),
                   (unsigned long long)count);
            first = false;
        }
        low = high + 1;
    }
    printf("]}\n");
    return 0;
}
