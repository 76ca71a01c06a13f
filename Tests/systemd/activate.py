#!/usr/bin/env python3
"""Socket activation for tests, as systemd does it (sd_listen_fds(3)).

    activate.py SOCKET_PATH [--metrics PORT] PROGRAM [ARGS...]

Binds and listens on the Unix socket SOCKET_PATH and places it on fd 3 (named
authgated.socket); with --metrics, also listens on 127.0.0.1:PORT and places it on fd 4,
named "metrics" (as authgated-metrics.socket's FileDescriptorName= does). Sets LISTEN_FDS,
LISTEN_PID (this process, which the exec keeps) and LISTEN_FDNAMES, then execs PROGRAM.
"""
import os
import socket
import sys


def place(listener, descriptor):
    if listener.fileno() != descriptor:
        os.dup2(listener.fileno(), descriptor)
        listener.detach()
    # dup2 onto itself would keep close-on-exec: clear it explicitly.
    os.set_inheritable(descriptor, True)


def main():
    path, rest = sys.argv[1], sys.argv[2:]
    metrics_port = None
    if rest[:1] == ["--metrics"]:
        metrics_port, rest = int(rest[1]), rest[2:]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o660)
    listener.listen(128)
    names = ["authgated.socket"]
    metrics = None
    if metrics_port is not None:
        metrics = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        metrics.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        metrics.bind(("127.0.0.1", metrics_port))
        metrics.listen(64)
        names.append("metrics")
    place(listener, 3)
    if metrics is not None:
        place(metrics, 4)
    os.environ["LISTEN_FDS"] = str(len(names))
    os.environ["LISTEN_PID"] = str(os.getpid())
    os.environ["LISTEN_FDNAMES"] = ":".join(names)
    os.execv(rest[0], rest)


if __name__ == "__main__":
    main()
