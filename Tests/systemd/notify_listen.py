#!/usr/bin/env python3
"""A test $NOTIFY_SOCKET: prints every sd_notify datagram it receives, one per line, with the
newlines inside a message shown as '|'.

    notify_listen.py ADDRESS      # a path, or @name for an abstract socket

Prints "bound" once it listens, and stops on SIGTERM or when stdin closes.
"""
import os
import select
import signal
import socket
import sys


def main():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
    address = sys.argv[1]
    bind_to = "\0" + address[1:] if address.startswith("@") else address
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(bind_to)
    print("bound", flush=True)
    while True:
        ready, _, _ = select.select([receiver, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1024):
            return
        if receiver in ready:
            message = receiver.recv(4096).decode("utf-8", "replace")
            print(message.replace("\n", "|"), flush=True)


if __name__ == "__main__":
    main()
