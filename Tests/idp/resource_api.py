"""An API that takes Bearer tokens, on loopback over plain HTTP, for the Swift client's
HTTPAuthorizer (Tests/AuthGateSystemTests/HTTPAuthorizerTests.swift), and an upstream that
reports what it received, for `authgate proxy`'s tests and for moving large bodies both ways.

    .venv/bin/python Tests/idp/resource_api.py --workdir DIR

  GET /stale/...     401 (WWW-Authenticate: Bearer error="invalid_token") to the first token
                     this path prefix saw and to requests without one; 200 to any other token
  GET /once/TAG/...  the same as /stale/, with a first token of its own for each TAG
  GET /refuse/...    401 to everything
  GET /redirect?to=URL   302 to URL
  GET /events        200, text/event-stream, chunked: the event "data: one", then "data: two"
                     once /events/release has been asked (or 30 s have passed), then the end:
                     an upstream whose answer comes slowly
  GET /events/release   200, lets the waiting /events go on
  GET /events/abandoned  JSON {"abandoned": N}: the /events whose client closed the connection
                     while it waited for "two" (seen at once, not when "two" would be written)
  GET /_seen         JSON: one {"path", "token"} per request above, in order, where "token" is
                     a fingerprint of the Bearer token (never the token) or null without one
  GET, POST, PUT, DELETE, PATCH, HEAD /echo, /echo/...
                     200, JSON: {"method", "path", "query" (the raw query string, "" without
                     one), "headers": {lowercased name: value (repeated headers joined with
                     ", ")}, "authorization_scheme", "body_bytes", "body_sha256"}. Two headers
                     are never echoed: "authorization" is the fingerprint of its credentials
                     (what follows the scheme, e.g. the Bearer or DPoP token; the fingerprint
                     /_seen uses), its scheme in "authorization_scheme" (null without the
                     header), and "dpop" is true or false (whether a DPoP proof came), both
                     always present
  PUT, POST /upload  200, JSON: {"bytes": N, "sha256": hex} of the request body
  GET, HEAD /download?bytes=N[&chunked=1]
                     200 with N bytes, byte i being i % 251 (the client computes their sha256
                     the same way), with Content-Length, or chunked with chunked=1

A fingerprint is the first 12 hex digits of a value's sha256. /echo and /upload read the body
by its Content-Length or its chunked encoding (decoded here: http.server does not), and every
response but a chunked download has a Content-Length, so that a connection stays open for the
next request (HTTP/1.1 keep-alive). Bodies both ways move in pieces of 64 KiB and are never
held whole: a gibibyte uploads and downloads in constant memory. /echo, /upload and /download
take any request, with or without a token; a token is looked at only under /stale/, /once/ and
/refuse/, and any other GET without one is refused as before. A method other than GET on the
token paths is answered 501, as http.server does.

Prints {"port": N, "url": "http://127.0.0.1:N"} when it listens; serves until SIGTERM or its
parent dies.
"""

import argparse
import hashlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import certs

PIECE = 64 * 1024
# The download's pattern, byte i = i % 251, long enough that any 64 KiB piece is one slice of
# it from offset (position % 251).
PATTERN = memoryview(bytes(i % 251 for i in range(PIECE + 251)))


def fingerprint(token):
    return None if token is None else hashlib.sha256(token.encode()).hexdigest()[:12]


class BadBody(Exception):
    """A request body that cannot be read as its headers say (a broken chunk, an early end)."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # http.server writes a response's head and its body apart: with Nagle's algorithm the body
    # waited for the client's delayed ACK, 40 ms a request on a kept-alive connection.
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        self.route()

    def do_HEAD(self) -> None:
        self.route()

    def do_POST(self) -> None:
        self.route()

    def do_PUT(self) -> None:
        self.route()

    def do_DELETE(self) -> None:
        self.route()

    def do_PATCH(self) -> None:
        self.route()

    def route(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/echo" or parts.path.startswith("/echo/"):
            return self.echo(parts)
        if parts.path == "/upload" and self.command in ("PUT", "POST"):
            return self.upload()
        if parts.path == "/download" and self.command in ("GET", "HEAD"):
            return self.download(parts)
        if parts.path in ("/events", "/events/release", "/events/abandoned") and self.command == "GET":
            return self.events(parts.path)
        if self.command != "GET":
            # What http.server answers a method it has no do_ for (and closes the connection,
            # the body unread).
            return self.send_error(501, "Unsupported method (%r)" % self.command)
        self.token_paths(parts)

    def token_paths(self, parts) -> None:
        if not self.drain():
            return
        if parts.path == "/_seen":
            with self.server.lock:
                return self.reply(200, json.dumps(self.server.seen), "application/json")
        authorization = self.headers.get("Authorization")
        token = authorization[len("Bearer "):] if authorization and authorization.startswith("Bearer ") else None
        # The prefix whose first token is refused: "/stale/", or "/once/TAG/".
        segments = parts.path.split("/")
        prefix = "/stale/" if parts.path.startswith("/stale/") else (
            "/".join(segments[:3]) + "/" if parts.path.startswith("/once/") and len(segments) > 3 else None)
        with self.server.lock:
            self.server.seen.append({"path": parts.path, "token": fingerprint(token)})
            if prefix is not None and token is not None:
                self.server.firsts.setdefault(prefix, token)
            first = self.server.firsts.get(prefix)
        if parts.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", parse_qs(parts.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        refused = parts.path.startswith("/refuse/") or token is None or (prefix is not None and token == first)
        if refused:
            return self.reply(401, "refused", "text/plain", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        self.reply(200, "ok", "text/plain")

    def echo(self, parts) -> None:
        digest = hashlib.sha256()
        try:
            count = self.read_body(digest)
        except BadBody as error:
            return self.refuse_body(error)
        headers = {}
        for name, value in self.headers.items():
            name = name.lower()
            headers[name] = headers[name] + ", " + value if name in headers else value
        authorization = headers.pop("authorization", None)
        scheme, _, credentials = authorization.partition(" ") if authorization is not None else (None, "", "")
        headers["authorization"] = None if authorization is None else fingerprint(credentials.strip())
        headers["dpop"] = headers.pop("dpop", None) is not None
        answer = {
            "method": self.command, "path": parts.path, "query": parts.query, "headers": headers,
            "authorization_scheme": scheme, "body_bytes": count, "body_sha256": digest.hexdigest(),
        }
        self.reply(200, json.dumps(answer), "application/json")

    def upload(self) -> None:
        digest = hashlib.sha256()
        try:
            count = self.read_body(digest)
        except BadBody as error:
            return self.refuse_body(error)
        self.reply(200, json.dumps({"bytes": count, "sha256": digest.hexdigest()}), "application/json")

    def download(self, parts) -> None:
        if not self.drain():
            return
        query = parse_qs(parts.query)
        try:
            size = int(query["bytes"][0])
            if size < 0:
                raise ValueError
        except (KeyError, ValueError):
            return self.reply(400, "bytes=N is required (N >= 0)", "text/plain")
        chunked = query.get("chunked", ["0"])[0] not in ("0", "")
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        if self.command == "HEAD":
            return
        position = 0
        while position < size:
            count = min(PIECE, size - position)
            piece = PATTERN[position % 251:position % 251 + count]
            if chunked:
                self.wfile.write(b"%x\r\n" % count + piece + b"\r\n")
            else:
                self.wfile.write(piece)
            position += count
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def events(self, path) -> None:
        if not self.drain():
            return
        if path == "/events/release":
            self.server.released.set()
            return self.reply(200, "released", "text/plain")
        if path == "/events/abandoned":
            with self.server.lock:
                return self.reply(200, json.dumps({"abandoned": self.server.abandoned}), "application/json")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index, event in enumerate((b"data: one\n\n", b"data: two\n\n")):
            if index:
                if not self.wait_for_release():
                    with self.server.lock:
                        self.server.abandoned += 1
                    self.close_connection = True
                    return
                self.server.released.clear()
            self.wfile.write(b"%x\r\n" % len(event) + event + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def wait_for_release(self) -> bool:
        """Waits up to 30 s for /events/release; False as soon as the client closes the
        connection (its end readable with nothing to read)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.server.released.wait(0.05):
                return True
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                return False
        return True

    def read_body(self, digest) -> int:
        """Reads the request body, by its chunked encoding or its Content-Length (none: no body),
        into `digest` in pieces of at most 64 KiB; returns its length."""
        buffer = memoryview(bytearray(PIECE))
        encodings = [item.strip().lower() for item in ",".join(self.headers.get_all("Transfer-Encoding", [])).split(",") if item.strip()]
        if encodings:
            if encodings[-1] != "chunked":
                raise BadBody("a Transfer-Encoding that does not end in chunked")
            total = 0
            while True:
                line = self.rfile.readline(1024)
                if not line.endswith(b"\n"):
                    raise BadBody("a chunk size line that does not end")
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise BadBody("a chunk size that is not hexadecimal") from None
                if size == 0:
                    break
                self.read_exactly(size, buffer, digest)
                total += size
                if self.rfile.read(2) != b"\r\n":
                    raise BadBody("a chunk not followed by CRLF")
            # Trailers, up to the empty line.
            while True:
                line = self.rfile.readline(8192)
                if not line.endswith(b"\n"):
                    raise BadBody("trailers that do not end")
                if line in (b"\r\n", b"\n"):
                    return total
        length = self.headers.get("Content-Length")
        if length is None:
            return 0
        try:
            size = int(length)
            if size < 0:
                raise ValueError
        except ValueError:
            raise BadBody("a Content-Length that is not a number") from None
        self.read_exactly(size, buffer, digest)
        return size

    def read_exactly(self, size, buffer, digest) -> None:
        while size > 0:
            view = buffer[:min(size, len(buffer))]
            count = self.rfile.readinto(view)
            if not count:
                raise BadBody("the body ended early")
            if digest is not None:
                digest.update(view[:count])
            size -= count

    def drain(self) -> bool:
        """Reads and drops a body a request may carry where none is expected, so that the
        connection stays usable; false (answered, closing) when it cannot be read."""
        try:
            self.read_body(None)
            return True
        except BadBody as error:
            self.refuse_body(error)
            return False

    def refuse_body(self, error) -> None:
        self.close_connection = True
        self.reply(400, f"unreadable body: {error}", "text/plain", {"Connection": "close"})

    def reply(self, status, body, content_type, headers=None) -> None:
        data = body.encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format, *args) -> None:
        sys.stderr.write("resource_api %s\n" % (format % args))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.parse_args()
    certs.unblock_stop_signals()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.lock = threading.Lock()
    server.seen = []
    server.abandoned = 0
    server.firsts = {}
    server.released = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    parent = os.getppid()

    def watch_parent():
        while True:
            if os.getppid() != parent:
                os._exit(0)
            threading.Event().wait(1)

    threading.Thread(target=watch_parent, daemon=True).start()
    port = server.server_address[1]
    print(json.dumps({"port": port, "url": f"http://127.0.0.1:{port}"}), flush=True)
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
