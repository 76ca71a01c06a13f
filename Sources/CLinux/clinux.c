// The functions are static inline in include/clinux.h (SwiftPM wants one source file), but for
// ag_run_child, ag_spawn_supervised_child and ag_spawn_opener, which need _GNU_SOURCE (pipe2,
// POSIX_SPAWN_SETSID, addclosefrom_np, execvpe).
#define _GNU_SOURCE
#include "clinux.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>

/// Milliseconds left until `deadline` (CLOCK_MONOTONIC), at least 0.
static int ag_remaining_ms(const struct timespec *deadline) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long left = (long long)(deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
    return left < 0 ? 0 : (left > 0x7fffffff ? 0x7fffffff : (int)left);
}

/// Reads what `fd` has into `buffer` (up to `capacity`, the rest dropped); returns 0 at end
/// of file or on an error, 1 while the descriptor stays open.
static int ag_drain(int fd, unsigned char *buffer, size_t capacity, size_t *length) {
    unsigned char chunk[4096];
    ssize_t count = read(fd, chunk, sizeof chunk);
    if (count < 0) return errno == EINTR || errno == EAGAIN ? 1 : 0;
    if (count == 0) return 0;
    size_t room = capacity - *length;
    size_t kept = (size_t)count < room ? (size_t)count : room;
    memcpy(buffer + *length, chunk, kept);
    *length += kept;
    // The chunk may have held a secret (the child's answer).
    memset(chunk, 0, sizeof chunk);
    return 1;
}

int ag_run_child(const char *path, char *const argv[], char *const envp[],
                 const unsigned char *input, size_t input_length,
                 unsigned char *output, size_t output_capacity, size_t *output_length,
                 unsigned char *error_output, size_t error_capacity, size_t *error_length,
                 int timeout_ms, int cancel_fd, int *exit_status) {
    int in[2], out[2], err[2];
    *output_length = 0;
    *error_length = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) return -1;
    if (pipe2(out, O_CLOEXEC) != 0) { int saved = errno; close(in[0]); close(in[1]); errno = saved; return -1; }
    if (pipe2(err, O_CLOEXEC) != 0) {
        int saved = errno; close(in[0]); close(in[1]); close(out[0]); close(out[1]); errno = saved; return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[1], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    // Descriptors someone opened without O_CLOEXEC (a library) stay out of the child too.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
    pid_t pid;
    int spawned = posix_spawn(&pid, path, &actions, &attributes, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    close(in[1]);
    close(out[1]);
    close(err[1]);
    if (spawned != 0) {
        close(in[0]); close(out[0]); close(err[0]);
        errno = spawned;
        return -1;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec += 1; deadline.tv_nsec -= 1000000000L; }

    size_t written = 0;
    int input_open = 1, output_open = 1, error_open = 1, timed_out = 0, cancelled = 0;
    if (input_length == 0) { shutdown(in[0], SHUT_WR); input_open = 0; }
    while (output_open || error_open) {
        struct pollfd watched[4];
        int count = 0;
        int input_slot = -1, output_slot = -1, error_slot = -1, cancel_slot = -1;
        if (cancel_fd >= 0) { cancel_slot = count; watched[count++] = (struct pollfd){ .fd = cancel_fd, .events = POLLIN }; }
        if (input_open) { input_slot = count; watched[count++] = (struct pollfd){ .fd = in[0], .events = POLLOUT }; }
        if (output_open) { output_slot = count; watched[count++] = (struct pollfd){ .fd = out[0], .events = POLLIN }; }
        if (error_open) { error_slot = count; watched[count++] = (struct pollfd){ .fd = err[0], .events = POLLIN }; }
        int left = ag_remaining_ms(&deadline);
        if (left == 0) { timed_out = 1; break; }
        int ready = poll(watched, (nfds_t)count, left);
        if (ready < 0) {
            if (errno == EINTR) continue;
            timed_out = 1;
            break;
        }
        if (cancel_slot >= 0 && watched[cancel_slot].revents) { timed_out = 1; cancelled = 1; break; }
        if (input_slot >= 0 && watched[input_slot].revents) {
            ssize_t sent = send(in[0], input + written, input_length - written, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (sent > 0) written += (size_t)sent;
            if ((sent < 0 && errno != EINTR && errno != EAGAIN) || written == input_length) {
                shutdown(in[0], SHUT_WR);
                input_open = 0;
            }
        }
        if (output_slot >= 0 && watched[output_slot].revents) output_open = ag_drain(out[0], output, output_capacity, output_length);
        if (error_slot >= 0 && watched[error_slot].revents) error_open = ag_drain(err[0], error_output, error_capacity, error_length);
    }
    close(in[0]);
    close(out[0]);
    close(err[0]);
    int status = 0;
    // Both outputs closed: the child is exiting (or closed them and went on, which the
    // deadline covers too).
    while (!timed_out) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        if (done < 0 && errno != EINTR) { timed_out = 1; break; }
        if (ag_remaining_ms(&deadline) == 0) { timed_out = 1; break; }
        struct timespec pause = { 0, 2000000L };
        nanosleep(&pause, NULL);
    }
    if (timed_out) {
        // The whole session: a helper the child started must not outlive it either.
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        return cancelled ? -3 : -2;
    }
    *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return 0;
}

int ag_tcp_socket_owner(const unsigned char *local, unsigned short local_port, const unsigned char *remote, unsigned short remote_port, int length, unsigned *uid, unsigned *inode) {
    if (length != 4 && length != 16) {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -1;
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;  // not NLM_F_DUMP: the one socket with this id
    message.request.sdiag_family = length == 4 ? AF_INET : AF_INET6;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    message.request.id.idiag_sport = htons(local_port);
    message.request.id.idiag_dport = htons(remote_port);
    memcpy(message.request.id.idiag_src, local, (size_t)length);
    memcpy(message.request.id.idiag_dst, remote, (size_t)length);
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    long answer[1024];  // aligned for nlmsghdr
    ssize_t received;
    do {
        received = recv(fd, answer, sizeof answer, 0);
    } while (received < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    if (received < 0) {
        errno = saved;
        return -1;
    }
    for (struct nlmsghdr *header = (struct nlmsghdr *)answer; NLMSG_OK(header, (size_t)received); header = NLMSG_NEXT(header, received)) {
        if (header->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *failure = NLMSG_DATA(header);
            errno = failure->error < 0 ? -failure->error : EPROTO;
            return -1;
        }
        if (header->nlmsg_type == SOCK_DIAG_BY_FAMILY && header->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            struct inet_diag_msg *socket_info = NLMSG_DATA(header);
            // The kernel's lookup falls back to a listening socket on the local port when no
            // connection has these ends: only the connection itself is an answer.
            if (socket_info->id.idiag_sport != htons(local_port) || socket_info->id.idiag_dport != htons(remote_port) ||
                memcmp(socket_info->id.idiag_src, local, (size_t)length) != 0 || memcmp(socket_info->id.idiag_dst, remote, (size_t)length) != 0) {
                errno = ENOENT;
                return -1;
            }
            *uid = socket_info->idiag_uid;
            *inode = socket_info->idiag_inode;
            return 0;
        }
    }
    errno = ENOENT;
    return -1;
}

int ag_spawn_supervised_child(pid_t *pid, const char *file, char *const argv[], char *const envp[], int death_signal) {
    // The child writes exec's errno here when the command cannot be run; close-on-exec, so
    // that a started command closes it and the parent reads the end of file.
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return errno;
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        int saved = errno;
        close(report[0]);
        close(report[1]);
        return saved;
    }
    if (child == 0) {
        close(report[0]);
        const int defaults[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE};
        for (size_t index = 0; index < sizeof defaults / sizeof defaults[0]; index++) signal(defaults[index], SIG_DFL);
        int failure = 0;
        if (prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0) != 0) {
            failure = errno;
        } else if (getppid() != parent) {
            _exit(128 + death_signal);  // the supervisor ended before the death signal was set
        } else {
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            execvpe(file, argv, envp);
            failure = errno;
        }
        ssize_t ignored = write(report[1], &failure, sizeof failure);
        (void)ignored;
        _exit(127);
    }
    close(report[1]);
    int failure = 0;
    ssize_t count;
    do {
        count = read(report[0], &failure, sizeof failure);
    } while (count < 0 && errno == EINTR);
    close(report[0]);
    if (count == (ssize_t)sizeof failure) {
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
        return failure;
    }
    *pid = child;
    return 0;
}

int ag_spawn_opener(const char *opener, const char *url, char *const envp[]) {
    posix_spawn_file_actions_t actions;
    int failed = posix_spawn_file_actions_init(&actions);
    if (failed != 0) return failed;
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
    char *const argv[] = {(char *)opener, (char *)url, NULL};
    pid_t pid;
    failed = posix_spawnp(&pid, opener, &actions, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    return failed;
}
