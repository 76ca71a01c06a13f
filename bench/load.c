/*
 * load.c - a cheap closed-loop load generator for line servers on Unix sockets.
 *
 * Usage: load --socket PATH --request LINE --clients N
 *             --mode per-request|keep-alive --seconds S [--threads T]
 *
 * Runs N simulated clients, each a closed loop that sends LINE + '\n' and
 * waits for one answer line before sending again:
 *
 *   per-request  each request uses a new connection: connect, send, read to
 *                the answer's '\n', close.  Latency runs from just before the
 *                (first) connect attempt to the answer's '\n'.
 *   keep-alive   each client keeps one connection for the whole run.  Latency
 *                runs from just before the send to the answer's '\n'.
 *
 * The clients are spread over T threads (default 1); each thread runs its
 * clients as non-blocking state machines on its own epoll instance.
 *
 * A connect() that fails with EAGAIN (server backlog full) or ECONNREFUSED
 * counts as a retry and is tried again after a short (1 ms) pause.  Any other
 * failure counts as an error for that request and the client starts over on a
 * new connection.  An answer containing "error": counts as an error, not as a
 * request.  Requests still in flight at the deadline are not counted.
 *
 * Prints one line of JSON on stdout at the end:
 *   {"requests":R,"errors":E,"retries":X,"seconds":S,"requests_per_second":Q,
 *    "p50_us":A,"p99_us":B,"max_us":C,"cpu_us_per_request":U}
 * where U is the generator's own CPU time (user + system) per request.
 *
 * Exit status: 0 on success, 1 on a system failure, 2 on bad usage.
 *
 * Build: cc -O2 -Wall -Wextra -std=gnu11 -o load load.c -lpthread
 */

#define _GNU_SOURCE   /* for memmem() */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum {
    HISTOGRAM_LIMIT_US = 1000000,   /* 1-microsecond buckets up to 1 second */
    HISTOGRAM_BUCKETS = HISTOGRAM_LIMIT_US + 1,   /* plus one overflow bucket */
    ANSWER_BUFFER_SIZE = 4096,
    MAX_EVENTS = 256,
    RETRY_PAUSE_MS = 1,
    MAX_WAIT_MS = 100,
};

/* The marker that makes an answer count as an error. */
static const char ERROR_MARKER[] = "\"error\":";
#define ERROR_MARKER_LENGTH (sizeof ERROR_MARKER - 1)

/* Where a client is in its request loop. */
enum client_state {
    STATE_PAUSED,       /* waiting to (re)try connecting on the next iteration */
    STATE_CONNECTING,   /* connect() in progress, waiting for EPOLLOUT */
    STATE_SENDING,      /* request partly sent, waiting for EPOLLOUT */
    STATE_READING,      /* request sent, waiting for the answer line */
};

/* One simulated client. */
struct client {
    struct worker *worker;
    enum client_state state;
    int fd;                   /* -1 when there is no connection */
    uint32_t watched_events;  /* events registered with epoll; 0 if none */
    bool timing;              /* start_ns is set for the current request */
    int64_t start_ns;         /* when the current request started */
    size_t sent;              /* bytes of the request sent so far */
    bool saw_error_marker;    /* the answer so far contains "error": */
    size_t carry;             /* bytes kept at the front of buffer */
    char buffer[ANSWER_BUFFER_SIZE];
};

/* One thread with its clients, epoll instance and statistics. */
struct worker {
    pthread_t thread;
    int epoll_fd;
    struct client *clients;
    int client_count;
    uint64_t requests;
    uint64_t errors;
    uint64_t retries;
    uint64_t max_us;
    uint64_t *histogram;      /* HISTOGRAM_BUCKETS counters */
};

/* Settings shared (read-only) by all threads. */
static struct sockaddr_un server_address;
static char *request_line;        /* LINE followed by '\n' */
static size_t request_length;
static bool keep_alive;
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

/* Returns true if time t is before the deadline, so its outcome counts. */
static bool counts(int64_t t)
{
    return t < deadline_ns;
}

/* Records one failed request, drops the connection and schedules a new one. */
static void fail(struct client *c)
{
    if (counts(now_ns()))
        c->worker->errors++;
    disconnect(c);
    c->timing = false;
    c->state = STATE_PAUSED;
}

/* Sends the rest of the request; then waits for the answer (or for EPOLLOUT). */
static void send_rest(struct client *c)
{
    while (c->sent < request_length) {
        ssize_t n = send(c->fd, request_line + c->sent, request_length - c->sent,
                         MSG_NOSIGNAL);
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

/* Starts a request on the client's (connected) socket by sending LINE. */
static void begin_send(struct client *c)
{
    if (!c->timing) {                /* keep-alive: latency starts at send */
        c->start_ns = now_ns();
        c->timing = true;
    }
    c->sent = 0;
    c->carry = 0;
    c->saw_error_marker = false;
    send_rest(c);
}

/* Tries to open a new connection; on success goes on to send the request. */
static void begin_connect(struct client *c)
{
    if (!c->timing && !keep_alive) { /* per-request: latency starts at connect */
        c->start_ns = now_ns();
        c->timing = true;
    }

    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        fail(c);
        return;
    }
    if (connect(c->fd, (struct sockaddr *)&server_address, sizeof server_address) == 0) {
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
        disconnect(c);               /* keep timing: the request still waits */
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

/* Adds one latency to the worker's histogram and maximum. */
static void record_latency(struct worker *w, int64_t latency_ns)
{
    uint64_t us = latency_ns > 0 ? (uint64_t)latency_ns / 1000 : 0;
    w->histogram[us < HISTOGRAM_LIMIT_US ? us : HISTOGRAM_LIMIT_US]++;
    if (us > w->max_us)
        w->max_us = us;
}

/* Counts a completed answer and starts the client's next request. */
static void complete(struct client *c)
{
    int64_t end = now_ns();
    struct worker *w = c->worker;
    if (counts(end)) {
        if (c->saw_error_marker) {
            w->errors++;
        } else {
            w->requests++;
            record_latency(w, end - c->start_ns);
        }
    }
    c->timing = false;

    if (keep_alive) {
        begin_send(c);
    } else {
        disconnect(c);
        begin_connect(c);
    }
}

/* Reads what is available of the answer; completes the request on its '\n'. */
static void read_answer(struct client *c)
{
    char *fresh = c->buffer + c->carry;
    ssize_t n = read(c->fd, fresh, sizeof c->buffer - c->carry);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {                    /* closed or reset before the '\n' */
        fail(c);
        return;
    }

    /* Look for the marker in the kept tail plus the new bytes up to '\n'. */
    char *newline = memchr(fresh, '\n', (size_t)n);
    size_t scan_end = newline ? (size_t)(newline - c->buffer) : c->carry + (size_t)n;
    if (memmem(c->buffer, scan_end, ERROR_MARKER, ERROR_MARKER_LENGTH) != NULL)
        c->saw_error_marker = true;

    if (newline != NULL) {
        if (newline != fresh + n - 1) {   /* bytes after the answer: protocol error */
            fail(c);
            return;
        }
        complete(c);
        return;
    }

    /* Keep the last few bytes so a marker split across reads is still found. */
    size_t keep = scan_end < ERROR_MARKER_LENGTH - 1 ? scan_end : ERROR_MARKER_LENGTH - 1;
    memmove(c->buffer, c->buffer + scan_end - keep, keep);
    c->carry = keep;
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
        read_answer(c);
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
            "usage: load --socket PATH --request LINE --clients N\n"
            "            --mode per-request|keep-alive --seconds S [--threads T]\n");
    exit(2);
}

/* Parses a positive integer option value, or exits with the usage message. */
static int parse_count(const char *text)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < 1 || value > 1000000)
        usage();
    return (int)value;
}

/* Parses the options, runs the workers and prints the JSON summary. */
int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"socket", required_argument, NULL, 's'},
        {"request", required_argument, NULL, 'r'},
        {"clients", required_argument, NULL, 'c'},
        {"mode", required_argument, NULL, 'm'},
        {"seconds", required_argument, NULL, 'S'},
        {"threads", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    const char *socket_path = NULL, *request = NULL, *mode = NULL;
    int client_count = 0, thread_count = 1;
    double seconds = 0;

    int option;
    while ((option = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (option) {
        case 's': socket_path = optarg; break;
        case 'r': request = optarg; break;
        case 'c': client_count = parse_count(optarg); break;
        case 'm': mode = optarg; break;
        case 't': thread_count = parse_count(optarg); break;
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
    if (optind != argc || socket_path == NULL || request == NULL || mode == NULL ||
        client_count == 0 || seconds == 0)
        usage();
    if (strcmp(mode, "keep-alive") == 0)
        keep_alive = true;
    else if (strcmp(mode, "per-request") != 0)
        usage();
    if (strchr(request, '\n') != NULL) {
        fprintf(stderr, "load: --request must be a single line\n");
        exit(2);
    }

    memset(&server_address, 0, sizeof server_address);
    server_address.sun_family = AF_UNIX;
    if (strlen(socket_path) >= sizeof server_address.sun_path) {
        fprintf(stderr, "load: socket path too long: %s\n", socket_path);
        exit(2);
    }
    strcpy(server_address.sun_path, socket_path);

    request_length = strlen(request) + 1;
    request_line = malloc(request_length);
    if (request_line == NULL)
        die("malloc");
    memcpy(request_line, request, request_length - 1);
    request_line[request_length - 1] = '\n';

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
        total->retries += w->retries;
        if (w->max_us > total->max_us)
            total->max_us = w->max_us;
        for (int b = 0; b < HISTOGRAM_BUCKETS; b++)
            total->histogram[b] += w->histogram[b];
    }

    double elapsed = (double)(end_ns - start_ns) / 1e9;
    /* The generator's own CPU time per request: its ceiling on this machine is the cores it
     * may use divided by this (shown beside the figures by authgate-bench). */
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu_us = (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6
                  + (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
    printf("{\"requests\":%llu,\"errors\":%llu,\"retries\":%llu,\"seconds\":%.4f,"
           "\"requests_per_second\":%.1f,\"p50_us\":%llu,\"p99_us\":%llu,\"max_us\":%llu,"
           "\"cpu_us_per_request\":%.2f}\n",
           (unsigned long long)total->requests, (unsigned long long)total->errors,
           (unsigned long long)total->retries, elapsed,
           (double)total->requests / elapsed,
           (unsigned long long)percentile(total->histogram, total->requests, 0.50, total->max_us),
           (unsigned long long)percentile(total->histogram, total->requests, 0.99, total->max_us),
           (unsigned long long)total->max_us,
           total->requests ? cpu_us / (double)total->requests : 0.0);
    return 0;
}
