/*
 * floor.c - the cheapest possible line server over a Unix socket.
 *
 * Usage: floor SOCKET_PATH ANSWER_LINE
 *
 * Listens on a SOCK_STREAM Unix socket at SOCKET_PATH and, for every '\n'
 * received on any connection, writes ANSWER_LINE followed by '\n'.  It does
 * no parsing at all, so it is the "floor" any real server is measured
 * against.  Single-threaded, epoll, non-blocking sockets.
 *
 * Prints "ready\n" on stdout once it is listening.  Exits cleanly (removing
 * the socket path) on SIGTERM or SIGINT.
 *
 * Build: cc -O2 -Wall -Wextra -std=gnu11 -o floor floor.c
 */

#define _GNU_SOURCE   /* for accept4() */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum {
    LISTEN_BACKLOG = 4096,   /* the kernel caps this at net.core.somaxconn */
    READ_BUFFER_SIZE = 64 * 1024,
    MAX_EVENTS = 256,
};

/* One read buffer shared by all connections: we are single-threaded and
 * never keep data between reads (only newlines are counted). */
static char read_buffer[READ_BUFFER_SIZE];

/* The answer line with its trailing '\n', sent once per request line. */
static char *answer;
static size_t answer_length;

/* Prints a message with errno's description and exits with status 1. */
static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* Creates the listening socket at path (removing any stale one) and returns it. */
static int listen_on(const char *path)
{
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof address.sun_path) {
        fprintf(stderr, "floor: socket path too long: %s\n", path);
        exit(2);
    }
    strcpy(address.sun_path, path);

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    unlink(path);
    if (bind(fd, (struct sockaddr *)&address, sizeof address) < 0)
        die("bind");
    if (listen(fd, LISTEN_BACKLOG) < 0)
        die("listen");
    return fd;
}

/* Adds fd to the epoll instance, watching for readability. */
static void watch(int epoll_fd, int fd)
{
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) < 0)
        die("epoll_ctl");
}

/* Accepts every pending connection on the listener and watches each one. */
static void accept_all(int epoll_fd, int listen_fd)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                perror("accept4");
            return;
        }
        watch(epoll_fd, fd);
    }
}

/* Reads what is available on a connection and answers each line in it;
 * closes the connection on end of file, on error, or on a short write. */
static void serve(int fd)
{
    ssize_t n = read(fd, read_buffer, sizeof read_buffer);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        close(fd);   /* closing also removes fd from the epoll set */
        return;
    }

    const char *p = read_buffer;
    const char *end = read_buffer + n;
    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        p++;
        ssize_t sent = send(fd, answer, answer_length, MSG_NOSIGNAL);
        if (sent != (ssize_t)answer_length) {
            close(fd);
            return;
        }
    }
}

/* Blocks SIGTERM and SIGINT and returns a signalfd that reports them. */
static int termination_signals(void)
{
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    if (sigprocmask(SIG_BLOCK, &signals, NULL) < 0)
        die("sigprocmask");
    int fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        die("signalfd");
    return fd;
}

/* Runs the server until SIGTERM or SIGINT, then removes the socket path. */
int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: floor SOCKET_PATH ANSWER_LINE\n");
        return 2;
    }
    const char *path = argv[1];

    answer_length = strlen(argv[2]) + 1;
    answer = malloc(answer_length);
    if (answer == NULL)
        die("malloc");
    memcpy(answer, argv[2], answer_length - 1);
    answer[answer_length - 1] = '\n';

    signal(SIGPIPE, SIG_IGN);   /* clients may reset connections at any time */
    int signal_fd = termination_signals();

    int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0)
        die("epoll_create1");
    int listen_fd = listen_on(path);
    watch(epoll_fd, listen_fd);
    watch(epoll_fd, signal_fd);

    printf("ready\n");
    fflush(stdout);

    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        int count = epoll_wait(epoll_fd, events, MAX_EVENTS, -1);
        if (count < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < count; i++) {
            int fd = events[i].data.fd;
            if (fd == signal_fd)
                goto shut_down;
            else if (fd == listen_fd)
                accept_all(epoll_fd, listen_fd);
            else
                serve(fd);
        }
    }

shut_down:
    close(listen_fd);
    unlink(path);
    return 0;
}
