#ifndef AUTHGATE_CLINUX_H
#define AUTHGATE_CLINUX_H

// Linux calls the daemon needs, as small C functions: Swift's Glibc module lacks some
// (sys/prctl.h), and C structs such as timespec, rlimit or sockaddr_un are claimed by
// whichever C module a clean build imports first, which MemberImportVisibility then rejects.

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <spawn.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/// prctl(PR_SET_DUMPABLE, 0): no ptrace or /proc/PID/mem access by other processes of the
/// same uid, and no core file. Returns 0, or -1 with errno set.
static inline int ag_set_not_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/// The device and inode of the file at `path` (links followed): a file's identity, which
/// another file put at the same path does not share. Returns 0, or -1 with errno set.
static inline int ag_file_identity(const char *path, unsigned long long *device, unsigned long long *inode) {
    struct stat info;
    if (stat(path, &info) != 0) return -1;
    *device = (unsigned long long)info.st_dev;
    *inode = (unsigned long long)info.st_ino;
    return 0;
}

/// When process `pid` started, in clock ticks since boot (`/proc/PID/stat` field 22): with the
/// pid, it names one process, as a pid alone does not once the pid is reused. 0 when unknown.
static inline unsigned long long ag_process_start_time(int pid) {
    char path[64], buffer[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t length = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (length <= 0) return 0;
    buffer[length] = 0;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    char *field = strrchr(buffer, ')');
    if (field == NULL) return 0;
    for (int index = 2; index < 22 && field != NULL; index++) field = strchr(field + 1, ' ');
    return field == NULL ? 0 : strtoull(field + 1, NULL, 10);
}

/// libFuzzer's driver (linked only into the fuzz targets, built by scripts/fuzz): runs the
/// fuzzing loop with `callback` as the target. Declared here because SwiftPM gives each
/// executable a `main` of its own, so libFuzzer's `main` cannot be used.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const unsigned char *data, size_t size));

/// Makes stdout line-buffered even when it is a pipe (Swift 6 cannot name the C global `stdout`).
static inline void ag_line_buffer_stdout(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
}

/// Forgets that stdin reached its end (glibc's end of file is sticky), for when another file
/// has just been put at descriptor 0 (Swift 6 cannot name the C global `stdin`).
static inline void ag_clear_stdin_end(void) {
    clearerr(stdin);
}

/// RLIMIT_CORE 0 (soft and hard). Returns 0, or -1 with errno set.
static inline int ag_disable_core_dumps(void) {
    struct rlimit none = { 0, 0 };
    return setrlimit(RLIMIT_CORE, &none);
}

/// Raises the soft RLIMIT_NOFILE to the hard one; returns the soft limit in effect.
static inline long long ag_raise_descriptor_limit(void) {
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) != 0) return -1;
    if (files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &files) != 0) getrlimit(RLIMIT_NOFILE, &files);
    }
    return (long long)files.rlim_cur;
}

/// CLOCK_MONOTONIC in microseconds (systemd's MONOTONIC_USEC).
static inline unsigned long long ag_monotonic_usec(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (unsigned long long)now.tv_sec * 1000000ULL + (unsigned long long)now.tv_nsec / 1000ULL;
}

/// Sends one datagram to the Unix socket `path` (`path_length` bytes; a leading '@' names an
/// abstract socket). Returns 0, or -1 with errno set. This is all of sd_notify(3).
static inline socklen_t ag_unix_address(struct sockaddr_un *address, const char *path, size_t path_length);

static inline int ag_send_datagram(const char *path, size_t path_length, const char *message, size_t length) {
    struct sockaddr_un address;
    socklen_t size = ag_unix_address(&address, path, path_length);
    if (size == 0) { errno = EINVAL; return -1; }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    ssize_t sent = sendto(fd, message, length, MSG_NOSIGNAL, (struct sockaddr *)&address, size);
    int saved = errno;
    close(fd);
    errno = saved;
    return sent == (ssize_t)length ? 0 : -1;
}

/// `ag_send_datagram` with descriptors attached (SCM_RIGHTS): sd_pid_notify_with_fds(3), for
/// `FDSTORE=1` (systemd's file descriptor store). Returns 0, or -1 with errno set.
static inline int ag_send_datagram_with_fds(const char *path, size_t path_length, const char *message, size_t length, const int *fds, int count) {
    struct sockaddr_un address;
    socklen_t size = ag_unix_address(&address, path, path_length);
    if (size == 0 || count < 1 || count > 16) { errno = EINVAL; return -1; }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct iovec vector = { .iov_base = (void *)message, .iov_len = length };
    union { char buffer[CMSG_SPACE(sizeof(int) * 16)]; struct cmsghdr align; } control;
    memset(&control, 0, sizeof control);
    struct msghdr header = {
        .msg_name = &address, .msg_namelen = size, .msg_iov = &vector, .msg_iovlen = 1,
        .msg_control = control.buffer, .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count),
    };
    struct cmsghdr *rights = CMSG_FIRSTHDR(&header);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
    memcpy(CMSG_DATA(rights), fds, sizeof(int) * (size_t)count);
    ssize_t sent = sendmsg(fd, &header, MSG_NOSIGNAL);
    int saved = errno;
    close(fd);
    errno = saved;
    return sent == (ssize_t)length ? 0 : -1;
}

/// A memfd (memory only, never a file on disk) named `name` holding `bytes`, sealed so that
/// nobody can change it any more (F_SEAL_WRITE, SHRINK, GROW, then SEAL). Returns the
/// descriptor (close-on-exec), or -1 with errno set.
static inline int ag_sealed_memfd(const char *name, const unsigned char *bytes, size_t length) {
    int fd = (int)syscall(SYS_memfd_create, name, 0x0001U | 0x0002U);  // MFD_CLOEXEC | MFD_ALLOW_SEALING
    if (fd < 0) return -1;
    size_t written = 0;
    while (written < length) {
        ssize_t count = write(fd, bytes + written, length - written);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) { int saved = errno; close(fd); errno = saved; return -1; }
        written += (size_t)count;
    }
    // F_ADD_SEALS (1033): F_SEAL_SEAL 1, F_SEAL_SHRINK 2, F_SEAL_GROW 4, F_SEAL_WRITE 8.
    if (fcntl(fd, 1033, 1 | 2 | 4 | 8) != 0) { int saved = errno; close(fd); errno = saved; return -1; }
    return fd;
}

/// Whether `fd` is a memfd sealed against every change (write, shrink, grow): 1, 0, or -1 with
/// errno set when it has no seals at all (not a memfd).
static inline int ag_is_sealed_memfd(int fd) {
    int seals = fcntl(fd, 1034);  // F_GET_SEALS
    if (seals < 0) return -1;
    return (seals & (2 | 4 | 8)) == (2 | 4 | 8) ? 1 : 0;
}

/// Fills `address` for the Unix socket `path` (a leading '@' names an abstract socket);
/// returns the address length, or 0 when the path does not fit.
static inline socklen_t ag_unix_address(struct sockaddr_un *address, const char *path, size_t path_length) {
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    if (path_length == 0 || path_length >= sizeof address->sun_path) return 0;
    memcpy(address->sun_path, path, path_length);
    if (address->sun_path[0] == '@') address->sun_path[0] = 0;
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_length);
}

/// A bound socket of `type` (SOCK_STREAM listening with `backlog`, or SOCK_DGRAM) on the Unix
/// socket `path`. Returns the descriptor, or -1 with errno set. The daemon binds its socket with it.
static inline int ag_bind_unix(const char *path, size_t path_length, int type, int backlog) {
    struct sockaddr_un address;
    socklen_t size = ag_unix_address(&address, path, path_length);
    if (size == 0) { errno = EINVAL; return -1; }
    int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *)&address, size) != 0 || (type == SOCK_STREAM && listen(fd, backlog) != 0)) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/// A stream socket connected to the Unix socket `path`. Returns the descriptor, or -1 with
/// errno set. Used by the benchmark's load generator.
static inline int ag_connect_unix(const char *path, size_t path_length) {
    struct sockaddr_un address;
    socklen_t size = ag_unix_address(&address, path, path_length);
    if (size == 0) { errno = EINVAL; return -1; }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&address, size) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/// How many bytes sent on the Unix stream socket `fd` its peer has not read yet (SIOCOUTQ: for
/// AF_UNIX, the sent data the sender is still charged for), or -1 with errno set. The tests use
/// it to know that the daemon has read what a client sent.
static inline int ag_unread_by_peer(int fd) {
    int count = 0;
    return ioctl(fd, SIOCOUTQ, &count) == 0 ? count : -1;
}

/// Adds `fd` to `epoll` for `events` (EPOLLIN, …), tagged with `tag`, which ag_epoll_wait reports.
/// Returns 0, or -1 with errno set. (Swift cannot use the packed `struct epoll_event` safely.)
static inline int ag_epoll_add(int epoll, int fd, unsigned events, unsigned long long tag) {
    struct epoll_event event = { .events = events, .data = { .u64 = tag } };
    return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
}

/// Changes the events `fd` is watched for in `epoll` (0: none, for now). Returns 0, or -1 with errno set.
static inline int ag_epoll_modify(int epoll, int fd, unsigned events, unsigned long long tag) {
    struct epoll_event event = { .events = events, .data = { .u64 = tag } };
    return epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event);
}

/// Waits up to `timeout_ms` (-1: no limit) for at most `capacity` (≤ 64) events of `epoll`,
/// and stores each one's tag and events in `tags` and `events`. Returns their number, or -1
/// with errno set.
static inline int ag_epoll_wait(int epoll, unsigned long long *tags, unsigned *events, int capacity, int timeout_ms) {
    struct epoll_event ready[64];
    if (capacity > 64) capacity = 64;
    int count = epoll_wait(epoll, ready, capacity, timeout_ms);
    for (int i = 0; i < count; i++) {
        tags[i] = ready[i].data.u64;
        events[i] = ready[i].events;
    }
    return count;
}

/// The peer of the connected Unix socket `fd` (SO_PEERCRED). Returns 0, or -1 with errno set.
static inline int ag_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid) {
    struct { int pid; unsigned uid; unsigned gid; } credentials;  // struct ucred, which needs _GNU_SOURCE
    socklen_t size = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

/// Gives the heap's free memory back to the kernel, every arena's (glibc keeps what a burst
/// freed for reuse, and gives back on its own only the top of the main arena). Returns 1 when
/// some memory was released.
static inline int ag_release_free_memory(void) {
    return malloc_trim(0);
}

/// The bytes the heap has handed out and not taken back: every arena's chunks in use, and the
/// chunks glibc mapped on their own (mallinfo2). What the tests measure a structure's cost by.
static inline size_t ag_heap_bytes_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

/// Names the calling thread (`ps -T`, `top -H`, /proc/PID/task/TID/comm): at most 15 bytes.
static inline void ag_set_thread_name(const char *name) {
    prctl(PR_SET_NAME, name, 0, 0, 0);
}

int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);  // declared by glibc only with _GNU_SOURCE

/// Accepts a connection on the listening socket `fd`, non-blocking and close-on-exec.
/// Returns the descriptor, or -1 with errno set (EAGAIN: none waiting).
static inline int ag_accept(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/// Runs the program at `path` (argv and envp NULL-terminated) in a new session, feeds it
/// `input` on stdin (a socket, so a child that exits early costs no SIGPIPE), collects up to
/// `output_capacity` bytes of stdout and `error_capacity` of stderr (more is read and dropped),
/// and waits for it at most `timeout_ms`; a child still running then is killed with SIGKILL.
/// Descriptors other than 0–2 are closed in the child. Returns 0 with `*exit_status` (the exit
/// code, or 128 + the signal), -1 with errno set when it could not be started, -2 on timeout.
/// `cancel_fd` (or -1): once it is readable the child is killed as at the deadline, and -3 returned.
int ag_run_child(const char *path, char *const argv[], char *const envp[],
                 const unsigned char *input, size_t input_length,
                 unsigned char *output, size_t output_capacity, size_t *output_length,
                 unsigned char *error_output, size_t error_capacity, size_t *error_length,
                 int timeout_ms, int cancel_fd, int *exit_status);

/// `authgate exec`'s supervisor (and `authgate proxy`): blocks SIGINT, SIGTERM, SIGHUP,
/// SIGQUIT and SIGCHLD in the calling thread (and so in every thread it starts later) and
/// returns a signalfd that reads them (close-on-exec), or -1 with errno set.
static inline int ag_supervisor_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGCHLD);
    int failed = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (failed != 0) {
        errno = failed;
        return -1;
    }
    return signalfd(-1, &set, SFD_CLOEXEC);
}

/// One signal from `ag_supervisor_signals`'s descriptor: its number, or -1 with errno set.
/// `sent_by_kernel` (or NULL) is set to whether the kernel sent it rather than a process's
/// kill(2): a terminal's Ctrl-C, Ctrl-\ and hang-up come so (SI_KERNEL), to the whole
/// foreground process group.
static inline int ag_read_signal(int descriptor, int *sent_by_kernel) {
    struct signalfd_siginfo info;
    ssize_t count = read(descriptor, &info, sizeof info);
    if (count != (ssize_t)sizeof info) return -1;
    if (sent_by_kernel) *sent_by_kernel = info.ssi_code == SI_KERNEL;
    return (int)info.ssi_signo;
}

/// Starts `opener URL` (posix_spawnp, `envp`) in the background with /dev/null as its standard
/// input and output and no other descriptor of ours, whatever was opened without O_CLOEXEC
/// (glibc 2.34's posix_spawn_file_actions_addclosefrom_np): a browser must not hold a helper's
/// pipes to git. Returns 0 or an errno value; the child is not waited for.
int ag_spawn_opener(const char *opener, const char *url, char *const envp[]);

/// posix_spawnp for a command authgate runs (a sink's `--on-change`): no signal blocked,
/// whatever the caller blocks, and SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD and SIGPIPE at
/// their default actions; in a process group of its own when `own_group` is non-zero.
/// Returns 0 or an errno value.
static inline int ag_spawn_child(pid_t *pid, const char *file, char *const argv[], char *const envp[], int own_group) {
    posix_spawnattr_t attributes;
    int failed = posix_spawnattr_init(&attributes);
    if (failed != 0) return failed;
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGHUP);
    sigaddset(&defaults, SIGQUIT);
    sigaddset(&defaults, SIGCHLD);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (own_group) {
        posix_spawnattr_setpgroup(&attributes, 0);
        flags |= POSIX_SPAWN_SETPGROUP;
    }
    posix_spawnattr_setflags(&attributes, flags);
    failed = posix_spawnp(pid, file, NULL, &attributes, argv, envp);
    posix_spawnattr_destroy(&attributes);
    return failed;
}

/// `authgate exec`'s supervised command: started as `ag_spawn_child` starts one (in the
/// caller's process group), and sent `death_signal` by the kernel when the calling thread ends
/// (PR_SET_PDEATHSIG), so that it does not outlive a supervisor killed with SIGKILL. Call it
/// from the thread that lives as long as the supervisor (its main thread). fork and execvpe,
/// since posix_spawn cannot set a death signal; the child makes system calls only.
/// Returns 0 or an errno value (the exec's, when the command could not be run).
int ag_spawn_supervised_child(pid_t *pid, const char *file, char *const argv[], char *const envp[], int death_signal);

/// The local (`peer` zero) or remote end of the socket `fd`: the address's bytes in network
/// order (4 for IPv4, 16 for IPv6) into `address` (16 bytes of room), their count into
/// `length`, the port in host order into `port`. Returns 0, or -1 with errno set
/// (EAFNOSUPPORT for a socket of another family).
static inline int ag_socket_end(int fd, int peer, unsigned char *address, int *length, unsigned short *port) {
    struct sockaddr_storage storage;
    socklen_t size = sizeof storage;
    int result = peer ? getpeername(fd, (struct sockaddr *)&storage, &size) : getsockname(fd, (struct sockaddr *)&storage, &size);
    if (result != 0) return -1;
    if (storage.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&storage;
        memcpy(address, &in->sin_addr, 4);
        *length = 4;
        *port = ntohs(in->sin_port);
        return 0;
    }
    if (storage.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&storage;
        memcpy(address, &in6->sin6_addr, 16);
        *length = 16;
        *port = ntohs(in6->sin6_port);
        return 0;
    }
    errno = EAFNOSUPPORT;
    return -1;
}

/// A numeric IPv4 or IPv6 address (`text`, as inet_pton reads it) into `address` (16 bytes of
/// room) in network order: returns how many bytes (4 or 16), or 0 for anything else.
static inline int ag_parse_address(const char *text, unsigned char *address) {
    if (strchr(text, ':') != NULL) return inet_pton(AF_INET6, text, address) == 1 ? 16 : 0;
    return inet_pton(AF_INET, text, address) == 1 ? 4 : 0;
}

/// The uid that owns the TCP socket whose local end is `local` and whose remote end is `remote`
/// (addresses of `length` bytes: 4 for IPv4, 16 for IPv6; ports in host order), and its inode
/// (0 once no process holds it: closed, or a TIME_WAIT remnant, whose uid the kernel reports
/// as 0), asked of the kernel's socket table by that exact pair (sock_diag(7),
/// NETLINK_SOCK_DIAG): one lookup, whatever the table's size; only a socket with exactly these
/// ends answers (not the listener the kernel's lookup falls back to). Returns 0 with `uid` and
/// `inode` set; -1 with errno ENOENT when there is no such socket (or no TCP diagnostics), or
/// another errno when the kernel could not be asked.
int ag_tcp_socket_owner(const unsigned char *local, unsigned short local_port, const unsigned char *remote, unsigned short remote_port, int length, unsigned *uid, unsigned *inode);

#endif
