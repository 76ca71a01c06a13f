"""A Kubernetes API server as far as `kubectl get --raw /api` needs one, on loopback over TLS.

    .venv/bin/python Tests/idp/kube_api.py --workdir DIR --token-file FILE

Answers GET /api with an APIVersions object when the request bears `Authorization: Bearer T`
where T is what FILE holds at that moment (the test writes the session's current token there),
and 401 otherwise. Prints {"port": N, "issuer": "https://127.0.0.1:N", "ca_file": ...} when it
listens; serves until SIGTERM or its parent dies. Each request is logged to stderr.
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import loopback


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        expected = Path(self.server.token_file).read_text().strip()
        if self.headers.get("Authorization", "") != f"Bearer {expected}" or not expected:
            body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized", "code": 401})
            return self.reply(401, body)
        if self.path.split("?")[0] != "/api":
            return self.reply(404, json.dumps({"kind": "Status", "code": 404}))
        self.reply(200, json.dumps({"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}))

    def reply(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--token-file", required=True)
    args = p.parse_args()

    def configure(server):
        server.token_file = args.token_file

    loopback.serve(Handler, args.workdir, configure=configure)


if __name__ == "__main__":
    main()
