#!/usr/bin/env python3
"""A stand-in for systemd's service manager and its file descriptor store, for tests.

    fdstore_manager.py NOTIFY_PATH LOG_FILE MAX_STORED PROGRAM [ARGS...]

Listens for sd_notify datagrams on NOTIFY_PATH and keeps the descriptors a service stores
with FDSTORE=1 under their FDNAME= (at most MAX_STORED, as FileDescriptorStoreMax= does;
FDSTOREREMOVE=1 drops one), then passes them to the next start as systemd does
(sd_listen_fds(3)): from fd 3 on, LISTEN_FDS, LISTEN_FDNAMES, and LISTEN_PID naming the
service's own pid. The service's output goes to LOG_FILE. Commands, one per line on stdin:

    start            start PROGRAM with NOTIFY_SOCKET and the stored descriptors
    stop             SIGTERM it and wait until it exits, still receiving (a restart keeps the store)
    flush            empty the store (what `systemctl stop` does)
    foreign NAME     replace the stored NAME with an unsealed memfd of other bytes

Prints one line per event: "started PID", "ready", "stored NAME", "removed NAME",
"exited STATUS", "store NAME,NAME" (after stop and flush), "ok" after each command.
"""
import os
import select
import signal
import socket
import subprocess
import sys


def main():
    notify_path, log_file, max_stored, program = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(notify_path)
    store = {}  # name -> descriptor, in the order stored
    child = None

    def say(line):
        print(line, flush=True)

    def receive():
        message, fds, _, _ = socket.recv_fds(receiver, 4096, 16)
        fields = dict(line.split("=", 1) for line in message.decode().split("\n") if "=" in line)
        name = fields.get("FDNAME", "stored")
        if fields.get("READY") == "1":
            say("ready")
        if fields.get("FDSTOREREMOVE") == "1" and name in store:
            os.close(store.pop(name))
            say("removed " + name)
        if fields.get("FDSTORE") == "1":
            for fd in fds:
                if name in store:
                    os.close(store.pop(name))
                if len(store) >= max_stored:
                    os.close(fd)
                    say("refused " + name)
                    continue
                store[name] = fd
                say("stored " + name)
        elif fds:
            for fd in fds:
                os.close(fd)

    def start():
        nonlocal child
        names = list(store)
        # Out of the way of fds 3.. first, then placed there in the child, as systemd does.
        high = [os.dup(store[name]) for name in names]
        moved = [fcntl_dup_high(fd) for fd in high]
        for fd in high:
            os.close(fd)

        def place():
            for index, fd in enumerate(moved):
                os.dup2(fd, 3 + index)
                os.set_inheritable(3 + index, True)

        environment = dict(os.environ, NOTIFY_SOCKET=notify_path)
        if names:
            environment.update(LISTEN_FDS=str(len(names)), LISTEN_FDNAMES=":".join(names))
        log = open(log_file, "ab")
        child = subprocess.Popen(
            ["/bin/sh", "-c", 'LISTEN_PID=$$ exec "$@"' if names else 'exec "$@"', "sh"] + program,
            env=environment,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            preexec_fn=place,
            pass_fds=tuple(range(3, 3 + len(names))),
        )
        log.close()
        for fd in moved:
            os.close(fd)
        say("started %d" % child.pid)

    def stop():
        nonlocal child
        child.send_signal(signal.SIGTERM)
        while child.poll() is None:
            if select.select([receiver], [], [], 0.05)[0]:
                receive()
        while select.select([receiver], [], [], 0.2)[0]:
            receive()
        say("exited %d" % child.returncode)
        child = None
        say("store " + ",".join(store))

    def foreign(name):
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        os.write(fd, b"AGH1" + os.urandom(64))
        if name in store:
            os.close(store.pop(name))
        store[name] = fd

    while True:
        ready = select.select([receiver, sys.stdin], [], [])[0]
        if receiver in ready:
            receive()
        if sys.stdin in ready:
            line = sys.stdin.readline()
            if not line:
                break
            command = line.split()
            if command[0] == "start":
                start()
            elif command[0] == "stop":
                stop()
            elif command[0] == "flush":
                for fd in store.values():
                    os.close(fd)
                store.clear()
                say("store ")
            elif command[0] == "foreign":
                foreign(command[1])
            say("ok")
    if child is not None:
        child.kill()
        child.wait()


def fcntl_dup_high(fd):
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)


if __name__ == "__main__":
    main()
