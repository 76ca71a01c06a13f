"""A desktop notification server stand-in on a session bus, for the daemon's notifications and
consent questions (the tests run it on a private dbus-daemon).

    DBUS_SESSION_BUS_ADDRESS=... .venv/bin/python Tests/idp/notifications.py --workdir DIR
        [--invoke ACTION]

It owns org.freedesktop.Notifications and implements the calls of the Desktop Notifications
Specification (https://specifications.freedesktop.org/notification-spec/1.2/protocol.html)
that libnotify's notify-send makes: GetCapabilities ("actions", "body"), GetServerInformation,
Notify and CloseNotification. Each Notify is appended to DIR/notifications.jsonl as one line of JSON:
{"id", "app_name", "summary", "body", "actions": {key: label}, "hints": [names]}. With
--invoke, a notification offering that action has it invoked at once, as if the user clicked
it: the ActionInvoked signal, then NotificationClosed with reason 2 (dismissed by the user).
Prints {"record": "DIR/notifications.jsonl"} once it owns the name; serves until SIGTERM or its
parent dies.
"""

import argparse
import json
import os
import signal
import sys
import threading

from jeepney import DBusAddress, HeaderFields, MessageType, new_error, new_method_return, new_signal
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--invoke")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    parent = os.getppid()

    def watch_parent() -> None:
        while os.getppid() == parent:
            threading.Event().wait(1)
        os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()

    connection = open_dbus_connection(bus="SESSION")
    reply = connection.send_and_get_reply(message_bus.RequestName(NAME, 4))  # DO_NOT_QUEUE
    if reply.body[0] != 1:
        sys.exit(f"could not own {NAME}: {reply.body[0]}")
    emitter = DBusAddress(PATH, interface=NAME)
    os.makedirs(args.workdir, exist_ok=True)
    record_path = os.path.join(args.workdir, "notifications.jsonl")
    print(json.dumps({"record": record_path}), flush=True)
    next_id = 1
    while True:
        message = connection.receive()
        if message.header.message_type != MessageType.method_call:
            continue
        member = message.header.fields.get(HeaderFields.member)
        if member == "GetCapabilities":
            connection.send(new_method_return(message, "as", (["actions", "body"],)))
        elif member == "GetServerInformation":
            connection.send(new_method_return(message, "ssss", ("authgate-tests", "authgate", "1", "1.2")))
        elif member == "Notify":
            app_name, _replaces, _icon, summary, body, actions, hints, _expire = message.body
            number, next_id = next_id, next_id + 1
            offered = dict(zip(actions[0::2], actions[1::2]))
            with open(record_path, "a") as record:
                record.write(json.dumps({"id": number, "app_name": app_name, "summary": summary, "body": body,
                                         "actions": offered, "hints": sorted(hints)}) + "\n")
            connection.send(new_method_return(message, "u", (number,)))
            if args.invoke and args.invoke in offered:
                connection.send(new_signal(emitter, "ActionInvoked", "us", (number, args.invoke)))
                connection.send(new_signal(emitter, "NotificationClosed", "uu", (number, 2)))
        elif member == "CloseNotification":
            connection.send(new_method_return(message))
            connection.send(new_signal(emitter, "NotificationClosed", "uu", (message.body[0], 3)))
        else:
            connection.send(new_error(message, "org.freedesktop.DBus.Error.UnknownMethod", "s", (f"no method {member}",)))


if __name__ == "__main__":
    main()
