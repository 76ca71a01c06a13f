"""An API that takes Bearer tokens, on loopback over plain HTTP, for the Swift client's
HTTPAuthorizer (Tests/AuthGateSystemTests/HTTPAuthorizerTests.swift).

    .venv/bin/python Tests/idp/resource_api.py --workdir DIR

  GET /stale/...     401 (WWW-Authenticate: Bearer error="invalid_token") to the first token
                     this path prefix saw and to requests without one; 200 to any other token
  GET /once/TAG/...  the same as /stale/, with a first token of its own for each TAG
  GET /refuse/...    401 to everything
  GET /redirect?to=URL   302 to URL
  GET /_seen         JSON: one {"path", "token"} per request above, in order, where "token" is
                     a fingerprint of the Bearer token (never the token) or null without one

Prints {"port": N, "url": "http://127.0.0.1:N"} when it listens; serves until SIGTERM or its
parent dies.
"""

import argparse
import hashlib
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import certs


def fingerprint(token):
    return None if token is None else hashlib.sha256(token.encode()).hexdigest()[:12]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
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

    def reply(self, status, body, content_type, headers=None) -> None:
        data = body.encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
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
    server.firsts = {}
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
