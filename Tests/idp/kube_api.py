"""A Kubernetes API server as far as `kubectl get --raw /api` needs one, on loopback over TLS.

    .venv/bin/python Tests/idp/kube_api.py --workdir DIR --token-file FILE
    .venv/bin/python Tests/idp/kube_api.py --workdir DIR --oidc-issuer-url URL --oidc-client-id ID --oidc-ca-file FILE

Answers GET /api with an APIVersions object when the request bears `Authorization: Bearer T`
where T is what FILE holds at that moment (the test writes the session's current token there),
and 401 otherwise. With --oidc-*, T must instead be an ID token as kube-apiserver's OIDC
authenticator takes one: a JWS signed with RS256 (kube-apiserver's default --oidc-signing-algs)
by a key of the issuer's JWKS (from its discovery
document, fetched per request), `iss` the issuer URL, `aud` containing the client id, `exp` in
the future (no leeway). Prints {"port": N, "issuer": "https://127.0.0.1:N", "ca_file": ...} when it
listens; serves until SIGTERM or its parent dies. Each request is logged to stderr.
"""

import argparse
import json
import ssl
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import loopback


class Handler(BaseHTTPRequestHandler):
    def authenticated(self) -> bool:
        header = self.headers.get("Authorization", "")
        if self.server.oidc is None:
            expected = Path(self.server.token_file).read_text().strip()
            return bool(expected) and header == f"Bearer {expected}"
        if not header.startswith("Bearer "):
            return False
        from jwcrypto import jwk, jwt
        issuer, client_id, ca_file = self.server.oidc
        context = ssl.create_default_context(cafile=ca_file)
        def get(url):
            with urllib.request.urlopen(url, context=context, timeout=10) as answer:
                return answer.read()
        try:
            discovery = json.loads(get(issuer + "/.well-known/openid-configuration"))
            keys = jwk.JWKSet.from_json(get(discovery["jwks_uri"]))
            token = jwt.JWT(check_claims={"iss": issuer, "exp": None}, expected_type="JWS", algs=["RS256"])
            token.leeway = 0
            token.deserialize(header[7:], keys)
            audience = json.loads(token.claims).get("aud")
            return client_id == audience or (isinstance(audience, list) and client_id in audience)
        except Exception as error:  # any failure is a refusal, as the authenticator's
            self.log_message("refused: %s", type(error).__name__)
            return False

    def do_GET(self) -> None:
        if not self.authenticated():
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
    p.add_argument("--token-file")
    p.add_argument("--oidc-issuer-url")
    p.add_argument("--oidc-client-id")
    p.add_argument("--oidc-ca-file")
    args = p.parse_args()
    if not args.token_file and not (args.oidc_issuer_url and args.oidc_client_id):
        p.error("give --token-file, or --oidc-issuer-url and --oidc-client-id")

    def configure(server):
        server.token_file = args.token_file
        server.oidc = (args.oidc_issuer_url, args.oidc_client_id, args.oidc_ca_file) if args.oidc_issuer_url else None

    loopback.serve(Handler, args.workdir, configure=configure)


if __name__ == "__main__":
    main()
