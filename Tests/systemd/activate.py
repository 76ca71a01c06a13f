#!/usr/bin/env python3
"""Socket activation for tests, as systemd does it (sd_listen_fds(3)).

    activate.py SOCKET_PATH PROGRAM [ARGS...]

Binds and listens on the Unix socket SOCKET_PATH, places it on fd 3, sets LISTEN_FDS=1,
LISTEN_PID (this process, which the exec keeps) and LISTEN_FDNAMES, then execs PROGRAM.
"""
import os
import socket
import sys


def main():
    path, program = sys.argv[1], sys.argv[2:]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o660)
    listener.listen(128)
    if listener.fileno() != 3:
        os.dup2(listener.fileno(), 3)
        listener.close()
    # dup2 onto itself would keep close-on-exec: clear it explicitly.
    os.set_inheritable(3, True)
    os.environ["LISTEN_FDS"] = "1"
    os.environ["LISTEN_PID"] = str(os.getpid())
    os.environ["LISTEN_FDNAMES"] = "authgated.socket"
    os.execv(program[0], program)


if __name__ == "__main__":
    main()
