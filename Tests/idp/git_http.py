"""git's own `git http-backend` behind HTTPS on loopback, with Basic authentication.

    .venv/bin/python Tests/idp/git_http.py --workdir DIR --project-root REPOS --token-file FILE

Every request must carry Basic credentials whose password is what FILE holds at that moment
(the test writes the session's current token there) — or, with --userinfo URL --userinfo-ca FILE,
any token the provider's userinfo endpoint accepts, as a forge that asks the identity provider
would — or it gets 401 with `WWW-Authenticate: Basic`; then the request is handed to `git http-backend` (CGI) for the
repositories under REPOS. `--path-token PREFIX=FILE` (repeatable) wants FILE's token for the
paths under /PREFIX instead, as a forge whose organisations sign in with different providers.
`Authorization: Bearer TOKEN` counts as the password TOKEN (git 2.46 and later send it when the
helper answers authtype=Bearer). Prints {"port": N, "issuer": "https://127.0.0.1:N", "ca_file": ...}
when it listens; serves until SIGTERM or its parent dies.
"""

import argparse
import base64
import os
import ssl
import subprocess
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import loopback


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.serve()

    def do_POST(self) -> None:
        self.serve()

    def accepts(self, password: str) -> bool:
        if not password:
            return False
        if self.server.userinfo:
            request = urllib.request.Request(self.server.userinfo, headers={"Authorization": f"Bearer {password}"})
            context = ssl.create_default_context(cafile=self.server.userinfo_ca)
            try:
                with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                    return answer.status == 200
            except (urllib.error.URLError, OSError):
                return False
        token_file = self.server.token_file
        for prefix, file in self.server.path_tokens:
            if self.path.startswith("/" + prefix):
                token_file = file
                break
        return token_file is not None and password == Path(token_file).read_text().strip()

    def serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        auth = self.headers.get("Authorization", "")
        password = ""
        if auth.startswith("Basic "):
            password = base64.b64decode(auth[6:]).decode(errors="replace").partition(":")[2]
        elif auth.startswith("Bearer "):
            password = auth[7:]
        if not self.accepts(password):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=self.server.project_root, GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path,
                   REQUEST_METHOD=self.command, QUERY_STRING=query, CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)), REMOTE_USER="git", REMOTE_ADDR="127.0.0.1")
        output = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, content = output.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode(errors="replace").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--project-root", required=True)
    p.add_argument("--token-file")
    p.add_argument("--userinfo", help="accept any token this userinfo endpoint accepts instead")
    p.add_argument("--userinfo-ca", help="the CA file of the userinfo endpoint's TLS")
    p.add_argument("--path-token", action="append", default=[], metavar="PREFIX=FILE",
                   help="the paths under /PREFIX want the token in FILE (longest PREFIX first)")
    args = p.parse_args()
    if not args.token_file and not args.userinfo and not args.path_token:
        p.error("give --token-file, --path-token or --userinfo")

    def configure(server):
        server.token_file = args.token_file
        server.path_tokens = sorted((tuple(item.split("=", 1)) for item in args.path_token), key=lambda pair: -len(pair[0]))
        server.userinfo, server.userinfo_ca = args.userinfo, args.userinfo_ca
        server.project_root = args.project_root

    loopback.serve(Handler, args.workdir, configure=configure)


if __name__ == "__main__":
    main()
