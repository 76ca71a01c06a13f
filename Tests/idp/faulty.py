"""A small HTTPS identity provider that misbehaves on demand, for what a real server will not do.

    .venv/bin/python Tests/idp/faulty.py --workdir DIR --mode MODE [--port N]
        [--delay SECONDS (5)] [--expires-in SECONDS (3600)]

Prints one line of JSON when it listens, {"port": N, "issuer": "https://127.0.0.1:N",
"ca_file": "DIR/ca.pem"}, then serves until SIGTERM or SIGINT (or until its parent dies)
and exits 0. Each request is logged to stderr, which the caller must drain or redirect.
DIR holds the TLS files of certs.py (shared with launch.py: an existing ca.pem/server.pem
pair is reused) and the RS256 signing key faulty-signing-key.pem.

Endpoints (the issuer is the origin, no path):
  GET  /.well-known/openid-configuration   grant_types_supported lacks authorization_code
  GET  /.well-known/oauth-authorization-server
                                           RFC 8414 metadata: 404, as most OpenID providers answer,
                                           except in the mode revocation_in_rfc8414
  GET  /jwks                               one RSA key, kid "faulty-1"
  POST /token                              answers as the mode says (below)
  POST /revoke                             200, or the mode's transport fault
  GET  /userinfo                           {"sub": "faulty-user", ..., "huge_number": 1e300} given a Bearer token
  GET  /user                               GitHub's authenticated user, which has no sub: {"login": "octocat",
                                           "id": 583231, "name": "The Octocat", "email": null} given a Bearer
                                           token (https://docs.github.com/en/rest/users/users#get-the-authenticated-user)
  POST /device                             a device authorization response (RFC 8628)
  GET  /authorize                          302 to the redirect_uri with a code and the state;
                                           the code remembers the request's access_type
  GET  /organizations/v2.0/.well-known/openid-configuration
                                           Microsoft Entra ID's multi-tenant discovery: the issuer
                                           is "<origin>/{tenantid}/v2.0", a template (see entra)
  GET  /_stats                             {"mode": ..., "requests": {"POST /token": 2, ...},
                                            "last_token_request": {"grant_type": ...,
                                            "client_id": ..., "client_auth": "basic"|"post"|"none",
                                            "scope": the scope parameter or null}}
                                           (control endpoints /_* are not counted)
  POST /_mode                              form body mode=MODE [&delay=SECONDS]: switch at run time

Modes (what /token answers; discovery and JWKS are normal unless said):
  ok                  200 {"access_token": "faulty-at-<n>", "token_type": "Bearer",
                      "expires_in": --expires-in, "refresh_token": "faulty-rt-<n>", "scope": the
                      requested scope (absent when none was)}, plus an RS256 id_token when the
                      scope has openid (iss, aud = client_id, sub "faulty-user", iat, exp =
                      iat + expires_in, nonce when the request had one). Every grant type works.
  http500             500 {"error": "server_error"}
  http503             503, Retry-After: 7, empty body
  html_error          502 with an HTML page
  empty_401           401, empty body
  empty_403           403, empty body
  invalid_grant       400 {"error": "invalid_grant", "error_description": ...}
  invalid_client      401 {"error": "invalid_client"}
  truncated           200, application/json, a body cut mid-JSON (Content-Length matches the cut body)
  truncated_transfer  200, Content-Length of the whole body, the connection closes halfway
  huge                200, a valid token response padded to 2 MiB
  wrong_types         200 {"access_token": 12345, "token_type": "Bearer", "expires_in": "soon"}
  not_json            200 text/plain "hello"
  slow                waits --delay seconds, then as ok
  no_expires_in       as ok without expires_in (RFC 6749 §5.1 only RECOMMENDS it; GitHub's OAuth
                      app tokens: https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps)
  pending_200         200 {"error": "authorization_pending", ...}: GitHub answers device polling
                      errors with HTTP 200 (the same page, "Error codes for the device flow")
  entra               as ok, but the id_token's iss is "<origin>/<TENANT>/v2.0" and its tid TENANT
                      (https://learn.microsoft.com/en-us/entra/identity-platform/id-token-claims-reference)
  entra_wrong_tenant  as entra, but iss names another tenant than tid
  refresh_refused     as ok, but a refresh_token grant is invalid_grant (the refresh token was revoked:
                      the session needs a new sign-in, which works)
  offline_only        as ok, but an authorization code issues a refresh token only when its
                      authorization request had access_type=offline (Google:
                      https://developers.google.com/identity/protocols/oauth2/web-server#offline)
  authorization_pending / slow_down / access_denied / expired_token
                      400 with that RFC 8628 error (device-code polling)
  id_token_unknown_kid, id_token_bad_signature, id_token_wrong_aud, id_token_wrong_issuer,
  id_token_expired, id_token_other_sub, id_token_alg_none, id_token_hs256, id_token_not_jwt
                      as ok (with openid), but the id_token has that defect (other_sub: the sub
                      "someone-else", as if the refresh token were another user's)
  no_kid              as ok, but the JWKS publishes its one key without a kid and the id_token's header
                      names none (RFC 7517 §4.5: kid is optional; OIDC Core §10.1 asks for it only
                      when there are several keys)
  injected_token      as ok, but the access_token is "tok\r\nX-Injected: yes"
  escape_error        400 {"error": "invalid_request"} with an error_description holding an OSC 52
                      clipboard write, a C1 CSI and CR LF (terminal and log injection)
  escape_user_code    the device authorization response's user_code holds an escape sequence
  issuer_mismatch     discovery names the issuer https://evil.example.com
  slow_discovery      discovery waits --delay seconds, then answers normally
  discovery_500       discovery answers 500
  revocation_in_rfc8414
                      as ok, but the discovery document names no revocation_endpoint and the
                      RFC 8414 metadata (/.well-known/oauth-authorization-server) names it
The transport faults (http500, http503, html_error, empty_401, empty_403, invalid_client,
slow) also apply to /revoke, /userinfo and /device; the other modes leave those normal.
"""

import argparse
import base64
import collections
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlencode

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

import certs
import loopback

KID = "faulty-1"
TRANSPORT_FAULTS = {"http500", "http503", "html_error", "empty_401", "empty_403", "invalid_client", "slow"}
DEVICE_ERRORS = {"authorization_pending", "slow_down", "access_denied", "expired_token"}
ID_TOKEN_DEFECTS = {"id_token_unknown_kid", "id_token_bad_signature", "id_token_wrong_aud",
                    "id_token_wrong_issuer", "id_token_expired", "id_token_other_sub",
                    "id_token_alg_none", "id_token_hs256", "id_token_not_jwt"}
MODES = TRANSPORT_FAULTS | DEVICE_ERRORS | ID_TOKEN_DEFECTS | {
    "ok", "invalid_grant", "truncated", "truncated_transfer", "huge", "wrong_types", "not_json",
    "issuer_mismatch", "slow_discovery", "discovery_500", "injected_token", "escape_error", "escape_user_code",
    "no_expires_in", "pending_200", "entra", "entra_wrong_tenant", "offline_only", "no_kid", "refresh_refused",
    "revocation_in_rfc8414",
}
TENANT = "9188040d-6c67-4c5b-b112-36a304b66dad"
ESCAPES = "\x1b]52;c;aGVsbG8=\x07\u009b2J\r\nforged line"
HTML_PAGE = b"<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>\n"


class State:
    """What the handler threads share: the mode, the delay and the counters."""

    def __init__(self, mode: str, delay: float):
        self.lock = threading.Lock()
        self.mode, self.delay = mode, delay
        self.counter = 0
        self.requests = collections.Counter()
        self.last_token_request = None
        self.last_authorization_request = None
        self.offline_codes = set()

    def next_number(self) -> int:
        with self.lock:
            self.counter += 1
            return self.counter


def jwt(claims: dict, key, kid: str | None) -> str:
    """An RS256 JSON Web Token (RFC 7519); its header names kid unless it is None."""
    header = certs.b64url(json.dumps({"alg": "RS256", "typ": "JWT"} | ({"kid": kid} if kid else {})).encode())
    payload = certs.b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{payload}.{certs.b64url(signature)}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    server_version = "faulty"
    sys_version = ""

    # -- plumbing

    @property
    def state(self) -> State:
        return self.server.state

    def send(self, status: int, body: bytes = b"", content_type: str | None = None,
             headers: dict | None = None, length: int | None = None) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, document, headers: dict | None = None) -> None:
        self.send(status, json.dumps(document).encode(), "application/json", headers)

    def read_form(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}

    def basic_client_id(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            return None
        try:
            return base64.b64decode(auth[6:]).decode().split(":", 1)[0]
        except (ValueError, UnicodeDecodeError):
            return None

    def transport_fault(self, mode: str) -> bool:
        """Answers with the mode's transport fault; True if it did (slow only delays)."""
        if mode == "slow":
            time.sleep(self.state.delay)
            return False
        if mode == "http500":
            self.send_json(500, {"error": "server_error"})
        elif mode == "http503":
            self.send(503, headers={"Retry-After": "7"})
        elif mode == "html_error":
            self.send(502, HTML_PAGE, "text/html; charset=utf-8")
        elif mode == "empty_401":
            self.send(401)
        elif mode == "empty_403":
            self.send(403)
        elif mode == "invalid_client":
            self.send_json(401, {"error": "invalid_client"}, {"WWW-Authenticate": 'Basic realm="faulty"'})
        else:
            return False
        return True

    def dispatch(self) -> None:
        path = self.path.split("?", 1)[0]
        if not path.startswith("/_"):
            with self.state.lock:
                self.state.requests[f"{self.command} {path}"] += 1
        route = self.server.routes.get((self.command, path))
        if route is None:
            self.send_json(404, {"error": "not_found"})
        else:
            route(self)

    do_GET = do_POST = dispatch

    def log_message(self, format, *args) -> None:
        sys.stderr.write(f"faulty [{self.state.mode}] {self.address_string()} {format % args}\n")

    # -- endpoints

    def discovery(self) -> None:
        mode, issuer = self.state.mode, self.server.issuer
        if mode == "discovery_500":
            return self.send_json(500, {"error": "server_error"})
        if mode == "slow_discovery":
            time.sleep(self.state.delay)
        document = {
            "issuer": "https://evil.example.com" if mode == "issuer_mismatch" else issuer,
            "token_endpoint": f"{issuer}/token",
            "revocation_endpoint": f"{issuer}/revoke",
            "userinfo_endpoint": f"{issuer}/userinfo",
            "jwks_uri": f"{issuer}/jwks",
            "device_authorization_endpoint": f"{issuer}/device",
            "grant_types_supported": ["password", "refresh_token", "client_credentials"],
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        }
        if mode == "revocation_in_rfc8414":
            del document["revocation_endpoint"]
        self.send_json(200, document)

    def authorization_server_metadata(self) -> None:
        """RFC 8414 §3: only in revocation_in_rfc8414, with the revocation endpoint that the
        discovery document leaves out then, and a token endpoint that discovery's must win over."""
        issuer = self.server.issuer
        if self.state.mode != "revocation_in_rfc8414":
            return self.send_json(404, {"error": "not_found"})
        self.send_json(200, {
            "issuer": issuer,
            "token_endpoint": f"{issuer}/not-the-token-endpoint",
            "revocation_endpoint": f"{issuer}/revoke",
            "jwks_uri": f"{issuer}/jwks",
            "response_types_supported": ["code"],
        })

    def entra_discovery(self) -> None:
        issuer = self.server.issuer
        self.send_json(200, {
            "issuer": f"{issuer}/{{tenantid}}/v2.0",
            "token_endpoint": f"{issuer}/token",
            "jwks_uri": f"{issuer}/jwks",
            "device_authorization_endpoint": f"{issuer}/device",
            "response_types_supported": ["code"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
        })

    def authorize(self) -> None:
        query = parse_qs(self.path.split("?", 1)[1] if "?" in self.path else "")
        params = {k: v[0] for k, v in query.items()}
        code = f"faulty-code-{self.state.next_number()}"
        with self.state.lock:
            self.state.last_authorization_request = {k: params.get(k) for k in ("access_type", "prompt", "response_type", "scope")}
            if params.get("access_type") == "offline":
                self.state.offline_codes.add(code)
        separator = "&" if "?" in params.get("redirect_uri", "") else "?"
        location = f"{params.get('redirect_uri', '')}{separator}{urlencode({'code': code, 'state': params.get('state', '')})}"
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def jwks(self) -> None:
        key = certs.rsa_public_jwk(self.server.key, KID)
        if self.state.mode == "no_kid":
            del key["kid"]
        self.send_json(200, {"keys": [key]})

    def token(self) -> None:
        form = self.read_form()
        basic_id = self.basic_client_id()
        client_id = basic_id or form.get("client_id")
        with self.state.lock:
            self.state.last_token_request = {
                "grant_type": form.get("grant_type"),
                "client_id": client_id,
                "client_auth": "basic" if basic_id else "post" if "client_secret" in form else "none",
                "scope": form.get("scope"),
            }
        mode = self.state.mode
        if self.transport_fault(mode):
            return
        if mode in DEVICE_ERRORS:
            return self.send_json(400, {"error": mode})
        if mode == "invalid_grant" or (mode == "refresh_refused" and form.get("grant_type") == "refresh_token"):
            return self.send_json(400, {"error": "invalid_grant",
                                        "error_description": "The refresh token is invalid or expired."})
        if mode == "wrong_types":
            return self.send_json(200, {"access_token": 12345, "token_type": "Bearer", "expires_in": "soon"})
        if mode == "not_json":
            return self.send(200, b"hello", "text/plain")
        if mode == "escape_error":
            return self.send_json(400, {"error": "invalid_request", "error_description": "bad " + ESCAPES})
        if mode == "pending_200":
            return self.send_json(200, {"error": "authorization_pending", "error_description": "The authorization request is still pending.",
                                        "error_uri": "https://docs.github.com/developers/apps/authorizing-oauth-apps#error-codes-for-the-device-flow"})

        n = self.state.next_number()
        now, expires_in = int(time.time()), self.server.expires_in
        response = {"access_token": f"faulty-at-{n}", "token_type": "Bearer", "expires_in": expires_in,
                    "refresh_token": f"faulty-rt-{n}"}
        if mode == "injected_token":
            response["access_token"] = "tok\r\nX-Injected: yes"
        if mode == "no_expires_in":
            del response["expires_in"]
        if mode == "offline_only" and form.get("grant_type") == "authorization_code":
            with self.state.lock:
                offline = form.get("code") in self.state.offline_codes
            if not offline:
                del response["refresh_token"]
        scope = form.get("scope")
        if scope is not None:
            response["scope"] = scope
        # id_token_other_sub: as a refresh with an ID token (no scope on a refresh request).
        if (scope and "openid" in scope.split()) or mode == "id_token_other_sub":
            response["id_token"] = self.id_token(mode, client_id, form.get("nonce"), now, expires_in)

        if mode == "huge":
            padding_size = 2 * 1024 * 1024 - len(json.dumps(response)) + 16
            response["padding"] = "x" * padding_size
        body = json.dumps(response).encode()
        if mode == "truncated":
            return self.send(200, body[: len(body) // 2], "application/json")
        if mode == "truncated_transfer":
            self.send(200, body[: len(body) // 2], "application/json", length=len(body))
            self.close_connection = True
            return
        self.send(200, body, "application/json")

    def id_token(self, mode: str, client_id: str | None, nonce: str | None, now: int, expires_in: int) -> str:
        claims = {"iss": self.server.issuer, "aud": client_id, "sub": "faulty-user",
                  "preferred_username": "faulty", "iat": now, "exp": now + expires_in}
        if nonce:
            claims["nonce"] = nonce
        if mode in ("entra", "entra_wrong_tenant"):
            tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47" if mode == "entra_wrong_tenant" else TENANT
            claims["iss"], claims["tid"] = f"{self.server.issuer}/{tenant}/v2.0", TENANT
        if mode == "id_token_wrong_aud":
            claims["aud"] = "someone-else"
        elif mode == "id_token_wrong_issuer":
            claims["iss"] = "https://evil.example.com"
        elif mode == "id_token_other_sub":
            claims["sub"] = "someone-else"
        elif mode == "id_token_expired":
            claims["iat"], claims["exp"] = now - 1200, now - 600
        token = jwt(claims, self.server.key, {"id_token_unknown_kid": "unknown-kid", "no_kid": None}.get(mode, KID))
        if mode in ("id_token_alg_none", "id_token_hs256"):
            # An unsigned token, or one "signed" with HMAC: both must be refused by their header.
            alg = "none" if mode == "id_token_alg_none" else "HS256"
            head = certs.b64url(json.dumps({"alg": alg, "typ": "JWT", "kid": KID}).encode())
            token = f"{head}.{token.split('.')[1]}." + ("" if alg == "none" else certs.b64url(b"x" * 32))
        if mode == "id_token_not_jwt":
            # The compact shape, but a header that is not JSON: only a JWT parser sees it.
            token = certs.b64url(b"not json") + token[token.index("."):]
        if mode == "id_token_bad_signature":
            # Flip bits in the middle of the signature: still base64url, no longer valid.
            head, sig = token.rsplit(".", 1)
            raw = bytearray(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)))
            raw[len(raw) // 2] ^= 0xFF
            token = f"{head}.{certs.b64url(bytes(raw))}"
        return token

    def revoke(self) -> None:
        self.read_form()
        if not self.transport_fault(self.state.mode):
            self.send(200)

    def userinfo(self) -> None:
        if self.transport_fault(self.state.mode):
            return
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            return self.send_json(401, {"error": "invalid_token"}, {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        self.send_json(200, {"sub": "faulty-user", "preferred_username": "faulty",
                             "name": "Faulty User", "email": "faulty@example.com", "huge_number": 1e300})

    def github_user(self) -> None:
        if self.transport_fault(self.state.mode):
            return
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            return self.send_json(401, {"message": "Requires authentication"})
        self.send_json(200, {"login": "octocat", "id": 583231, "node_id": "MDQ6VXNlcjU4MzIzMQ==", "type": "User",
                             "name": "The Octocat", "email": None})

    def device(self) -> None:
        self.read_form()
        if self.transport_fault(self.state.mode):
            return
        n = self.state.next_number()
        issuer = self.server.issuer
        user_code = f"FAULTY-{n}" + (ESCAPES if self.state.mode == "escape_user_code" else "")
        self.send_json(200, {"device_code": f"faulty-dc-{n}", "user_code": user_code,
                             "verification_uri": f"{issuer}/verify",
                             "verification_uri_complete": f"{issuer}/verify?user_code=FAULTY-{n}",
                             "expires_in": 600, "interval": 1})

    def stats(self) -> None:
        with self.state.lock:
            document = {"mode": self.state.mode, "requests": dict(self.state.requests),
                        "last_token_request": self.state.last_token_request,
                        "last_authorization_request": self.state.last_authorization_request}
        self.send_json(200, document)

    def set_mode(self) -> None:
        form = self.read_form()
        mode = form.get("mode")
        if mode not in MODES:
            return self.send_json(400, {"error": f"unknown mode {mode!r}", "modes": sorted(MODES)})
        with self.state.lock:
            self.state.mode = mode
            if "delay" in form:
                self.state.delay = float(form["delay"])
            if "expires_in" in form:
                self.server.expires_in = int(form["expires_in"])
        self.send_json(200, {"mode": mode, "delay": self.state.delay, "expires_in": self.server.expires_in})


ROUTES = {
    ("GET", "/.well-known/openid-configuration"): Handler.discovery,
    ("GET", "/.well-known/oauth-authorization-server"): Handler.authorization_server_metadata,
    ("GET", "/jwks"): Handler.jwks,
    ("GET", "/organizations/v2.0/.well-known/openid-configuration"): Handler.entra_discovery,
    ("GET", "/authorize"): Handler.authorize,
    ("POST", "/token"): Handler.token,
    ("POST", "/revoke"): Handler.revoke,
    ("GET", "/userinfo"): Handler.userinfo,
    ("GET", "/user"): Handler.github_user,
    ("POST", "/userinfo"): Handler.userinfo,
    ("POST", "/device"): Handler.device,
    ("GET", "/_stats"): Handler.stats,
    ("POST", "/_mode"): Handler.set_mode,
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--mode", choices=sorted(MODES), default="ok")
    p.add_argument("--port", type=int, default=0, help="default: a free port")
    p.add_argument("--delay", type=float, default=5.0, metavar="SECONDS")
    p.add_argument("--expires-in", type=int, default=3600, metavar="SECONDS")
    args = p.parse_args()

    def configure(server):
        server.routes = ROUTES
        server.key = certs.ensure_rsa_key(args.workdir.resolve() / "faulty-signing-key.pem")
        server.expires_in = args.expires_in
        server.state = State(args.mode, args.delay)

    loopback.serve(Handler, args.workdir, port=args.port, configure=configure)


if __name__ == "__main__":
    main()
