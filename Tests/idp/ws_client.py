"""A WebSocket client for the tests of `authgate proxy`'s protocol upgrades: connects to a URL
(through the proxy) with a forged `Authorization`, plays one scenario and prints what happened
as one JSON line.

    .venv/bin/python Tests/idp/ws_client.py echo|server-close|abort|idle|early|refused URL

  echo          sends three short messages and one of 200 000 bytes, each echoed, then "whoami";
                closes from the client's side: {"echoes": [...], "big": true, "whoami": FP}
  server-close  sends "hello", then "close", and waits for the server to close:
                {"echoes": ["hello"], "closed_by": "server", "code": 1000}
  abort         sends "hello", then closes its TCP connection without a WebSocket close:
                {"echoes": ["hello"]}
  idle          sends "hello", then waits, sending nothing, until the connection closes:
                {"echoes": ["hello"], "closed_after": SECONDS}
  early         a raw socket sends the handshake and a text frame "early" in one write, before
                the 101: {"status": 101, "echo": "early"}
  refused       the upgrade is refused: {"status": N, "reason": VALUE OF AuthGate-Reason or null}
"""

import base64
import json
import os
import socket
import sys
import time

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

FORGED = {"Authorization": "Bearer forged-by-the-client"}


def early(url) -> dict:
    """The handshake and a first frame in one write: the proxy has read the frame with the
    request, and must send it on after the 101, not drop it."""
    authority, path = url.split("/", 3)[2], "/" + url.split("/", 3)[3]
    host, port = authority.rsplit(":", 1)
    key = base64.b64encode(os.urandom(16)).decode()
    head = (f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: {FORGED['Authorization']}\r\n\r\n")
    payload, mask = b"early", os.urandom(4)
    frame = bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    with socket.create_connection((host, int(port))) as connection:
        connection.settimeout(20)
        connection.sendall(head.encode() + frame)
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 2 + len(payload):
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    answer, _, rest = data.partition(b"\r\n\r\n")
    return {"status": int(answer.split(b" ")[1]), "echo": rest[2:2 + len(payload)].decode(errors="replace")}


def main(scenario, url) -> dict:
    if scenario == "early":
        return early(url)
    if scenario == "refused":
        try:
            with connect(url, additional_headers=FORGED, open_timeout=20, compression=None):
                return {"status": 101}
        except InvalidStatus as error:
            return {"status": error.response.status_code, "reason": error.response.headers.get("AuthGate-Reason"),
                    "body": error.response.body.decode(errors="replace")}
    with connect(url, additional_headers=FORGED, open_timeout=20, compression=None, max_size=None) as websocket:
        if scenario == "echo":
            echoes = []
            for message in ("one", "two", "three"):
                websocket.send(message)
                echoes.append(websocket.recv(timeout=20))
            big = "x" * 200_000
            websocket.send(big)
            same = websocket.recv(timeout=20) == big
            websocket.send("whoami")
            whoami = websocket.recv(timeout=20)
            websocket.close()
            return {"echoes": echoes, "big": same, "whoami": whoami}
        websocket.send("hello")
        echoes = [websocket.recv(timeout=20)]
        if scenario == "abort":
            websocket.socket.shutdown(socket.SHUT_RDWR)
            return {"echoes": echoes}
        if scenario == "idle":
            started = time.monotonic()
            try:
                websocket.recv(timeout=60)
                return {"echoes": echoes, "closed_after": None}
            except ConnectionClosed:
                return {"echoes": echoes, "closed_after": time.monotonic() - started}
        websocket.send("close")
        try:
            websocket.recv(timeout=20)
            return {"echoes": echoes, "closed_by": None}
        except ConnectionClosed as closed:
            return {"echoes": echoes, "closed_by": "server", "code": closed.rcvd.code if closed.rcvd else None}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])), flush=True)
