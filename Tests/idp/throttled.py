"""A token endpoint that throttles as real providers do, for authgate-bench's fleet.

    .venv/bin/python Tests/idp/throttled.py --workdir DIR [--rate R (50)] [--expires-in SECONDS (40)]
        [--retry-after SECONDS (1)]

Entra ID answers a client-credentials client that asks too often with HTTP 429 and
`Retry-After: 60` (https://learn.microsoft.com/en-us/entra/msal/dotnet/advanced/client-and-server-throttling),
Okta with 429 and X-Rate-Limit-Reset (https://developer.okta.com/docs/reference/rl-best-practices/):
this one answers 429 with Retry-After (shorter, for a bench that lasts a minute) whenever it is
asked more than R times within the current second of its clock (a fixed one-second window).
Prints one line of JSON when it listens, {"port": N, "issuer": ..., "ca_file": ...} (TLS as
every server in Tests/idp: loopback.py), then serves until SIGTERM or its parent dies.

  POST /token    client credentials: 200 {"access_token": "throttled-at-<n>", "token_type":
                 "Bearer", "expires_in": --expires-in}; another grant type (authgated's probe
                 at start-up) 400 {"error": "unsupported_grant_type"}; either 429
                 {"error": "too_many_requests"} with Retry-After: --retry-after when throttled
  GET  /_stats   {"started": UNIX seconds, "seconds": {"S": [asked, throttled, other grants], ...}}
                 per whole second S since the start
"""

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs

import loopback


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def send(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode())
        probe = form.get("grant_type", [""])[0] != "client_credentials"
        if self.path != "/token":
            self.send(404, {"error": "not_found"})
            return
        server = self.server
        with server.lock:
            now = time.time()
            second = int(now - server.started)
            asked, throttled, probes = server.seconds.get(second, (0, 0, 0))
            allowed = asked < server.rate
            server.seconds[second] = (asked + 1, throttled + (0 if allowed else 1), probes + (1 if probe else 0))
            server.issued += 1
            serial = server.issued
        if allowed and probe:
            self.send(400, {"error": "unsupported_grant_type"})
        elif allowed:
            self.send(200, {"access_token": f"throttled-at-{serial}", "token_type": "Bearer", "expires_in": server.expires_in})
        else:
            self.send(429, {"error": "too_many_requests"}, {"Retry-After": str(server.retry_after)})

    def do_GET(self) -> None:
        if self.path != "/_stats":
            self.send(404, {"error": "not_found"})
            return
        with self.server.lock:
            seconds = {str(second): list(counts) for second, counts in sorted(self.server.seconds.items())}
        self.send(200, {"started": self.server.started, "seconds": seconds})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--rate", type=int, default=50)
    p.add_argument("--expires-in", type=int, default=40)
    p.add_argument("--retry-after", type=int, default=1)
    args = p.parse_args()

    def configure(server):
        server.lock = threading.Lock()
        server.started = time.time()
        server.seconds = {}
        server.issued = 0
        server.rate = args.rate
        server.expires_in = args.expires_in
        server.retry_after = args.retry_after

    loopback.serve(Handler, args.workdir, configure=configure)


if __name__ == "__main__":
    main()
