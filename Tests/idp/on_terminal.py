"""Runs a command under a pseudo-terminal (its controlling terminal, as a person's shell gives
it) and plays the person at it, for the Swift tests of what the CLI does on a terminal.

    on_terminal.py STEPS COMMAND [ARG ...]

STEPS is a JSON list, done in order; each waits until its text shows, then acts:
    {"after": TEXT, "type": LINE}        TEXT in the output's last line: types LINE and Return
    {"after": TEXT, "interrupt": true}   TEXT anywhere in the output: waits 0.3 s, types Ctrl-C
    {"after": TEXT, "hang_up": true}     TEXT anywhere in the output: closes the terminal (as a
                                         dropped ssh connection does); the last step
    {"after_pattern": REGEX, "approve_device": {"python": P, "play_user": F, "ca_file": CA,
        "username": U, "password": W}}
                                         the first match of REGEX (its group 1: a device
                                         verification URI with the user code) approved by
                                         play_user.py as that user
It reads until the command closes the terminal or 90 s pass (then kills it) and prints
{"status": EXIT_STATUS, "output": EVERYTHING_SHOWN, "done": STEPS_DONE, "approvals": [STDOUT, ...]}.
Only the standard library.
"""

import json
import os
import pty
import re
import select
import subprocess
import sys
import time


def main() -> None:
    steps, command = json.loads(sys.argv[1]), sys.argv[2:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    output, done, approvals = b"", 0, []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        readable, _, _ = select.select([fd], [], [], 0.1)
        if readable:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the command exited and closed the terminal
                break
            if not chunk:
                break
            output += chunk
        if done < len(steps) and act(steps[done], fd, output, approvals):
            done += 1
            if steps[done - 1].get("hang_up"):
                break
    else:
        os.kill(pid, 9)
    status = None
    while status is None and time.monotonic() < deadline:
        reaped, code = os.waitpid(pid, os.WNOHANG)
        if reaped:
            status = code
        else:
            time.sleep(0.02)
    if status is None:
        os.kill(pid, 9)
        _, status = os.waitpid(pid, 0)
    print(json.dumps({"status": os.waitstatus_to_exitcode(status), "output": output.decode("utf-8", "replace"),
                      "done": done, "approvals": approvals}))


def act(step: dict, fd: int, output: bytes, approvals: list) -> bool:
    """Does `step` if its text has shown; whether it did."""
    if "type" in step:
        if step["after"].encode() not in output.split(b"\n")[-1]:
            return False
        os.write(fd, step["type"].encode() + b"\n")
    elif step.get("hang_up"):
        if step["after"].encode() not in output:
            return False
        os.close(fd)
    elif step.get("interrupt"):
        if step["after"].encode() not in output:
            return False
        # The CLI ignores SIGINT and arms a dispatch source for it before it prints the text;
        # libdispatch arms the source on another thread, a moment later, and a Ctrl-C typed
        # in between would be ignored. Nothing on the terminal says when it is armed.
        time.sleep(0.3)
        os.write(fd, b"\x03")
    else:
        found = re.search(step["after_pattern"].encode(), output)
        if not found:
            return False
        person = step["approve_device"]
        approvals.append(subprocess.run(
            [person["python"], person["play_user"], "device", "--ca-file", person["ca_file"],
             "--verification-uri", found.group(1).decode(), "--username", person["username"],
             "--password", person["password"]],
            capture_output=True, text=True).stdout)
    return True


if __name__ == "__main__":
    main()
