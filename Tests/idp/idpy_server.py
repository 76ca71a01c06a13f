"""A real OAuth 2.0 / OpenID Connect authorization server built on idpyoidc 5.0.0, over TLS on
127.0.0.1, for what the django-oauth-toolkit server of launch.py lacks: DPoP (RFC 9449) with
server nonces, private_key_jwt and client_secret_jwt (RFC 7523), mutual TLS (RFC 8705),
pushed authorization requests (RFC 9126), token exchange (RFC 8693), dynamic client
registration (RFC 7591, with the RFC 7592 read and delete), and workload identity federation
with a loopback "platform" issuer (federated client assertions, the JWT bearer grant of RFC 7523
§2.1, the exchange of a platform JWT).

    .venv/bin/python Tests/idp/idpy_server.py --workdir DIR [--port N] [--mtls]
        [--access-token-lifetime SECONDS (3600)] [--platform-rotate SECONDS (2)]
        [--platform-token-lifetime SECONDS (600)]

When it listens, one line of JSON goes to stdout:

    {"port": N, "issuer": "https://127.0.0.1:N", "ca_file": "DIR/ca.pem", "workdir": "DIR",
     "client_cert_file": "DIR/client.pem", "client_key_file": "DIR/client-key.pem",
     "clients": {"authgate-dpop": {"auth_method": "none", "grant_types": [...],
                                   "secret_file": null, "key_file": null, "key_id": null}, ...,
                 "authgate-pkjwt-ec": {"auth_method": "private_key_jwt", "key_file":
                                       "DIR/authgate-pkjwt-ec-key.pem", "key_id": ..., ...}, ...},
     "users": {"alice": "alice-password-1"},
     "platform": {"issuer": "https://127.0.0.1:N/platform", "token_file": "DIR/platform/token",
                  "subject": "system:serviceaccount:apps:billing", "audience": issuer,
                  "jwks": "https://127.0.0.1:N/platform/jwks"},
     "service_account": {"issuer": "authgate-sa@authgate.test", "key_file":
                         "DIR/authgate-sa-key.pem", "key_id": "authgate-sa-1"},
     "endpoints": {"discovery", "authorization", "par", "token", "userinfo", "jwks",
                   "resource", "control", "stats", "registration", "platform_token", and with
                   --mtls "mtls_token", "mtls_par"}}

then it serves until SIGTERM or SIGINT (or until its parent dies) and exits 0. One line per
request goes to stderr (no secrets, tokens or codes), which the caller must drain.

DIR keeps the TLS files of certs.py (ca.pem, ca-key.pem, server.pem, server-key.pem), the CA
signed client certificate client.pem / client-key.pem (CN=authgate-mtls, O=authgate tests),
each client's secret <client_id>.secret or private key <client_id>-key.pem (PKCS#8 PEM, 0600,
reused when DIR is), the platform's and the service account's EC P-256 keys platform-key.pem
and authgate-sa-key.pem (the same), the platform's token in DIR/platform (below), and
idpyoidc's signing and encryption keys in DIR/idpy. Sessions and tokens live in memory only: a
restart forgets them.

Users: alice / alice-password-1 (sub "alice", Alice Example, alice@example.com). The
authorization endpoint signs alice in without any page (idpyoidc's NoAuthn), so a plain GET of
an authorization URL (response_type=code, PKCE S256, scope with openid, redirect_uri; or
client_id and a PAR request_uri) answers 302 straight to the redirect URI with code, state,
iss (RFC 9207), scope and client_id. An error goes there too (error, error_description,
state, iss) when the redirect URI is the client's, else it is a 400 JSON error (unknown client,
unregistered redirect URI, unknown / used / expired / another client's request_uri, PAR
required). offline_access needs prompt=consent (idpyoidc enforces OpenID Connect Core §11);
refresh tokens come anyway.

Clients (token endpoint authentication, grant types; all but authgate-workload may also use
refresh_token):
  authgate-dpop        none (public), DPoP required: a token request without a valid proof
                       gets 400 invalid_dpop_proof; password, authorization_code, token exchange
  authgate-pkjwt-ec    private_key_jwt ES256 (EC P-256 key in DIR, kid in the JSON);
                       client_credentials, password, authorization_code, token exchange
  authgate-pkjwt-rsa   private_key_jwt RS256 or PS256 (RSA 2048); the same grants
  authgate-secretjwt   client_secret_jwt HS256 with the secret file; the same grants
  authgate-exchange    client_secret_basic (or client_secret_post); the same grants
  authgate-par         none (public), require_pushed_authorization_requests: an authorization
                       request without a PAR request_uri gets 400 invalid_request;
                       authorization_code only
  with --mtls:
  authgate-mtls        tls_client_auth: client.pem, matched by its subject DN; tokens carry
                       cnf.x5t#S256; client_credentials, password, authorization_code, exchange
  authgate-mtls-self   self_signed_tls_client_auth: the self-signed DIR/authgate-mtls-self.pem
                       (cert_file in the JSON), registered as x5c in the client's jwks
  authgate-federated   federated_client_assertion: a platform JWT as client_assertion (below;
                       its JSON adds federated_issuer, federated_subject, federated_audience);
                       client_credentials
  authgate-workload    none (public); the JWT bearer grant and token exchange only
Every client has the redirect URI http://127.0.0.1/callback, on any port (RFC 8252), and the
scopes openid profile email offline_access read write (default for password and
client_credentials: read write). Authorization requests need PKCE S256, at PAR too. Access and
refresh tokens are ES256 JWTs (sub, client_id, scope, aud, cnf), ID tokens RS256, keys at
jwks_uri. Refresh tokens rotate: the one used stops working (400 invalid_grant). A code used
twice fails and revokes what it gave. client_credentials gives no refresh token; its sub is
the client_id.

Dynamic client registration (open: no initial access token): POST /registration with an
RFC 7591 JSON request answers 201 with client_id, registration_client_uri
(https://127.0.0.1:N/registration_api?client_id=ID) and registration_access_token, and
client_secret for the client_secret_* token_endpoint_auth_methods only (none: a public client;
private_key_jwt: its jwks, registered with it, sign its assertions). idpyoidc checks
the request: redirect URIs must be https, except for application_type "native" (http to
127.0.0.1 or localhost) or a "web" client with response_types ["code"]; grant_types must be ones
the server lists (else 400 invalid_request "Don't support proposed grant_types_supported");
a bad redirect URI is 400 invalid_redirect_uri. A registered client gets the scopes of the
configured ones; its registered http://127.0.0.1/PATH matches any port (RFC 8252 §7.3) as theirs
does. GET registration_client_uri with Authorization: Bearer <registration_access_token> reads
the registration (RFC 7592 §2.1); DELETE deletes the client (RFC 7592 §2.3: 204, then its
token requests get 401 invalid_client); a wrong token or a deleted client: 401 invalid_token.

Rules worth knowing:
  - JWT client assertions (verified by idpyoidc, with stricter checks in idpy_addons.py): aud
    must hold the issuer or the URL of the endpoint (token endpoint; at PAR, the PAR or token
    endpoint URL; with --mtls their aliases too, wherever the assertion is sent); iss = sub =
    client_id; exp and jti required, a jti is single use.
    client_assertion_type urn:ietf:params:oauth:client-assertion-type:jwt-bearer.
  - DPoP proofs: typ dpop+jwt, alg ES256/ES384/ES512/RS256/PS256/EdDSA, public jwk, htm the
    request method, htu the endpoint URL on this origin (https://127.0.0.1:N/token, or
    .../mtls/token at the alias; query and fragment ignored, scheme/host case and default
    port normalized), iat within 60 s, jti single use, one DPoP header, ath at /resource and
    /userinfo. Access tokens then have token_type DPoP and cnf.jkt; a public client's refresh
    token is bound to the key too (refreshing with another key or none: 400
    invalid_dpop_proof). A bad proof: 400 invalid_dpop_proof. A proof at PAR (htu the PAR
    URL), or dpop_jkt on the authorization request, binds the code to the key (RFC 9449 §10).
  - Token exchange (subject_token_type urn:ietf:params:oauth:token-type:access_token, an
    access token this server issued): audience / resource must be https://api.example.test
    (else 400 invalid_target); scope can only narrow; requested_token_type access_token (or
    refresh_token, given offline_access); a DPoP proof binds the new token.
  - Token errors answer 400 with {"error", "error_description"}: invalid_grant (bad or used
    code, refresh token or password), invalid_scope, invalid_request, unauthorized_client
    (grant not allowed to the client), unsupported_grant_type, invalid_dpop_proof,
    use_dpop_nonce, invalid_target; invalid_client answers 401 (WWW-Authenticate: Basic with
    Basic credentials) and says in error_description why idpyoidc refused each method tried.
  - Workload identity federation. The platform (issuer https://127.0.0.1:N/platform, ES256 key
    kid platform-1, like a Kubernetes service-account issuer) writes a JWT as kubelet writes a
    projected token: DIR/platform/token -> ..data/token, ..data a symlink renamed atomically
    onto a new DIR/platform/..<timestamp>.<random>/ (old ones removed), file mode 0644; a fresh
    one every --platform-rotate s, the first before the ready line. Its header {"alg": "ES256",
    "typ": "JWT", "kid": "platform-1"}, claims iss, sub system:serviceaccount:apps:billing, aud
    [issuer], iat = nbf = now, exp = iat + --platform-token-lifetime, a random jti. A platform
    JWT is accepted if it is ES256 (kid absent or platform-1) and verifies with the platform key,
    exp is ahead, nbf and iat at most 30 s ahead, aud names the expected audience; no jti check.
    (a) authgate-federated (with client_id and client_assertion_type jwt-bearer): sub must be
        its federated subject, aud contain the issuer; a refusal is 401 invalid_client saying
        "federated_client_assertion failed: the client assertion has expired ...".
    (b) grant_type urn:ietf:params:oauth:grant-type:jwt-bearer with assertion (authgate-workload,
        client_id in the form): a platform JWT (aud the issuer or token endpoint URL) or a
        service-account assertion (iss = sub = authgate-sa@authgate.test, ES256 by
        authgate-sa-key.pem, kid absent or authgate-sa-1, aud the same or the --mtls alias,
        exp required and at most 1 h after iat, jti required and single use). Token sub: the
        assertion's sub; scope the request's, else the assertion's scope claim, else read write;
        audience / resource as at the exchange; no refresh token; an ID token if openid.
    (c) token exchange with subject_token_type urn:ietf:params:oauth:token-type:jwt or
        ...:id_token: a platform JWT (aud the issuer), by authgate-workload or a confidential
        client; answers {"access_token", "token_type", "expires_in", "issued_token_type"
        (access_token), "scope"}, sub the JWT's sub, no refresh token; audience / resource
        https://api.example.test only (else invalid_target), requested_token_type access_token.
    A refused assertion or subject token is 400 invalid_grant saying why ("the assertion's jti
    was used before", "the subject token has expired (exp 60 s ago)", ...).
  - PAR answers 201 {"request_uri": "urn:uuid:...", "expires_in": 90}; a request_uri works
    once, for 90 s, for the client that pushed it.
  - With --mtls the TLS layer asks for a client certificate without requiring one: it must
    chain to the test CA or be a registered self-signed one (another one fails the
    handshake). Clients without certificates are not affected.

Endpoints (the issuer is the origin):
  GET  /.well-known/openid-configuration (also /.well-known/oauth-authorization-server)
  GET  /jwks    GET /authorization    POST /par    POST /token    GET|POST /userinfo
  POST /mtls/token, POST /mtls/par      the mtls_endpoint_aliases (same handlers), with --mtls
  POST /registration    GET|DELETE /registration_api?client_id=ID    (see above)
  GET  /resource    a protected resource: accepts Authorization: DPoP <token> with a DPoP
                    proof for GET https://127.0.0.1:N/resource (ath, cnf.jkt match), or
                    Bearer <token> for a token without cnf.jkt; 200 {"sub", "client_id",
                    "scope", "token_type", "cnf"}; else 401 with WWW-Authenticate: DPoP
                    error="invalid_token" or "invalid_dpop_proof" (Bearer error=... for
                    unbound tokens). A token with cnf.x5t#S256 needs the same TLS certificate.
  GET  /platform/jwks, GET /platform/.well-known/openid-configuration   the platform issuer's
                    JWKS and discovery ({"issuer", "jwks_uri", ...}); not counted in the stats

Control (not counted in the statistics):
  POST /test/mode    JSON {"mode": MODE} (or form mode=MODE): switch at run time; answers
                     {"mode", "nonce"}. GET /test/mode answers the same.
  GET  /test/stats   {"mode", "requests": {"POST /token": n, ...}, "token_requests",
                     "par_requests", "authorization_requests", "resource_requests",
                     "dpop_proofs" (seen at /token, /par, /resource and /userinfo),
                     "registrations" (201s at /registration), "deregistrations" (DELETEs done),
                     "dpop_proofs_refused", "nonce_challenges", "client_auth": {client_id:
                     the method its last authenticated request used}, "last_token_request":
                     {"path", "client_id", "grant_type", "auth_method", "dpop_jkt", "status",
                     "error"}, "federation": {"client_assertion", "jwt_bearer", "subject_token":
                     the jti of each platform or service-account JWT accepted there, in order,
                     the last 200}}
  POST /test/reset   zeroes the statistics
  POST /test/platform-token  JSON {"lifetime" (--platform-token-lifetime), "issued_ago" (0),
                     "not_before_in" (0), "sub", "aud", "iss"}, all optional: 200 {"token": a
                     JWT signed by the platform key, iat = now - issued_ago, exp = iat +
                     lifetime, nbf = now + not_before_in}, to make expired or not-yet-valid ones
Modes:
  normal         as described
  require-nonce  a token request's DPoP proof must carry the server's current nonce: without
                 it, 400 {"error": "use_dpop_nonce"} with a DPoP-Nonce: <nonce> header; with it,
                 as normal. The nonce changes only when the mode is set again.
  nonce-always   every token request with a DPoP proof gets use_dpop_nonce with a new nonce,
                 even when the proof carries the last one: a client that retries once gives up
  refuse-dpop    every DPoP proof at the token endpoint gets 400 invalid_dpop_proof
  resource-nonce /resource and /userinfo want the current nonce in the proof: without it, 401
                 WWW-Authenticate: DPoP error="use_dpop_nonce" and a DPoP-Nonce header
  par-fail       the PAR endpoint answers 500 {"error": "server_error"}
  par-error      the PAR endpoint answers 400 {"error": "invalid_request"}
  no-registration the discovery document names no registration_endpoint (the endpoint still works)
  initial-access-token  POST /registration wants Authorization: Bearer <the mode's nonce> (the
                 initial access token of RFC 7591 §3, as Keycloak's client registration
                 demands one): without it or with another, 401 {"error": "invalid_token"} and
                 WWW-Authenticate: Bearer error="invalid_token" (RFC 6750 §3.1); with it, the
                 registration as normal (the header is not passed on to idpyoidc)
"""

import argparse
import base64
import collections
import json
import logging
import os
import secrets
import shutil
import ssl
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptojwt.jwk.ec import ECKey
from cryptojwt.jwk.rsa import RSAKey

import certs
import idpy_addons as addons
import loopback
from idpyoidc.exception import OidcMsgError
from idpyoidc.message.oauth2 import ResponseMessage
from idpyoidc.server import Server
from idpyoidc.server.configure import OPConfiguration
from idpyoidc.server.exception import ClientAuthenticationError
from idpyoidc.server.oauth2.add_on.pkce import CC_METHOD
from idpyoidc.server.oauth2.token_helper import validate_token_exchange_policy
from idpyoidc.server.oidc.token_helper.access_token import AccessTokenHelper
from idpyoidc.server.user_info import UserInfo

USERS = {"alice": "alice-password-1"}
USER_CLAIMS = {"alice": {"name": "Alice Example", "given_name": "Alice", "family_name": "Example",
                         "preferred_username": "alice", "email": "alice@example.com",
                         "email_verified": True}}
SCOPES = ["openid", "profile", "email", "offline_access", "read", "write"]
DEFAULT_SCOPES = ["read", "write"]
REDIRECT_URI = "http://127.0.0.1/callback"
# Token exchange: the audiences and resources a token may be exchanged for.
EXCHANGE_TARGETS = ["https://api.example.test"]
ACCESS_TOKEN_TYPE = addons.ACCESS_TOKEN_TYPE
REFRESH_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:refresh_token"
TOKEN_EXCHANGE = addons.TOKEN_EXCHANGE
JWT_BEARER = addons.JWT_BEARER_GRANT
# The loopback platform (a Kubernetes service-account issuer, say) at {issuer}/platform, and the
# service account whose key signs jwt-bearer assertions.
PLATFORM_PATH = "/platform"
PLATFORM_KID = "platform-1"
PLATFORM_SUBJECT = "system:serviceaccount:apps:billing"
SERVICE_ACCOUNT = "authgate-sa@authgate.test"
SERVICE_ACCOUNT_KID = "authgate-sa-1"
CODE, REFRESH, PASSWORD, CLIENT_CREDENTIALS = "authorization_code", "refresh_token", "password", "client_credentials"
MODES = {"normal", "require-nonce", "nonce-always", "refuse-dpop", "resource-nonce", "par-fail", "par-error",
         "no-registration", "initial-access-token"}
# The client authentication methods the token and PAR endpoints try, in this order (idpyoidc's
# names: "public" is "none").
AUTHN_METHODS = ["client_secret_basic", "client_secret_post", addons.FEDERATED_METHOD, "client_secret_jwt",
                 "private_key_jwt", "tls_client_auth", "self_signed_tls_client_auth", "public"]
ACR = "urn:oasis:names:tc:SAML:2.0:ac:classes:InternetProtocolPassword"
# What idpyoidc keeps of a client's authentication in a pushed request.
PUSHED_CREDENTIALS = {"client_secret", "client_assertion", "client_assertion_type", "authenticated"}


@dataclass
class ClientSpec:
    auth_method: str            # token_endpoint_auth_method (RFC 7591)
    grant_types: list
    key: str | None = None      # "EC" or "RSA": a private_key_jwt key generated into DIR
    mtls: bool = False          # registered only with --mtls
    federated: bool = False     # trusts the platform's JWTs for PLATFORM_SUBJECT as its credentials
    metadata: dict = field(default_factory=dict)


_CONFIDENTIAL_GRANTS = [CLIENT_CREDENTIALS, PASSWORD, CODE, REFRESH, TOKEN_EXCHANGE]
CLIENTS = {
    "authgate-dpop": ClientSpec("none", [PASSWORD, CODE, REFRESH, TOKEN_EXCHANGE],
                                metadata={"dpop_bound_access_tokens": True}),
    "authgate-pkjwt-ec": ClientSpec("private_key_jwt", _CONFIDENTIAL_GRANTS, key="EC"),
    "authgate-pkjwt-rsa": ClientSpec("private_key_jwt", _CONFIDENTIAL_GRANTS, key="RSA"),
    "authgate-secretjwt": ClientSpec("client_secret_jwt", _CONFIDENTIAL_GRANTS),
    "authgate-exchange": ClientSpec("client_secret_basic", _CONFIDENTIAL_GRANTS),
    "authgate-par": ClientSpec("none", [CODE, REFRESH],
                               metadata={"require_pushed_authorization_requests": True}),
    "authgate-mtls": ClientSpec("tls_client_auth", _CONFIDENTIAL_GRANTS, mtls=True),
    "authgate-mtls-self": ClientSpec("self_signed_tls_client_auth", _CONFIDENTIAL_GRANTS, mtls=True),
    "authgate-federated": ClientSpec(addons.FEDERATED_METHOD, [CLIENT_CREDENTIALS, REFRESH], federated=True),
    "authgate-workload": ClientSpec("none", [JWT_BEARER, TOKEN_EXCHANGE]),
}
# What idpyoidc calls each registered method (RFC 7591 name -> idpyoidc authn method tags).
IDPY_AUTHN = {"none": ["public"], "client_secret_basic": ["client_secret_basic", "client_secret_post"]}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--port", type=int, default=0, help="default: a free port")
    p.add_argument("--mtls", action="store_true",
                   help="ask for TLS client certificates and register the mutual-TLS clients")
    p.add_argument("--access-token-lifetime", type=int, default=3600, metavar="SECONDS")
    p.add_argument("--platform-rotate", type=float, default=2, metavar="SECONDS",
                   help="how often the platform writes a fresh token into DIR/platform/token")
    p.add_argument("--platform-token-lifetime", type=int, default=600, metavar="SECONDS",
                   help="the lifetime of the platform's tokens")
    args = p.parse_args()
    if args.platform_rotate <= 0 or args.platform_token_lifetime <= 0:
        p.error("--platform-rotate and --platform-token-lifetime must be positive")
    return args


# -- the work directory


@dataclass
class ClientFiles:
    secret: str | None = None
    secret_file: Path | None = None
    key_file: Path | None = None
    key_id: str | None = None
    public_jwk: dict | None = None
    cert_file: Path | None = None


def _client_key(path: Path, kind: str):
    """The private key at path, generated (PKCS#8 PEM, 0600) the first time."""
    if path.exists():
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    key = (ec.generate_private_key(ec.SECP256R1()) if kind == "EC"
           else rsa.generate_private_key(public_exponent=65537, key_size=2048))
    certs.write_private(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    return key


def prepare_client(workdir: Path, client_id: str, spec: ClientSpec) -> ClientFiles:
    """Creates what DIR lacks of one client's credentials; returns them."""
    files = ClientFiles()
    if spec.auth_method in ("client_secret_basic", "client_secret_jwt"):
        files.secret_file = workdir / f"{client_id}.secret"
        if not files.secret_file.exists():
            certs.write_private(files.secret_file, secrets.token_urlsafe(32).encode())
        files.secret = files.secret_file.read_text()
    if spec.key:
        files.key_file, files.key_id = workdir / f"{client_id}-key.pem", f"{client_id}-1"
        private = _client_key(files.key_file, spec.key)
        jwk = (ECKey if spec.key == "EC" else RSAKey)(pub_key=private.public_key(), kid=files.key_id,
                                                        use="sig")
        files.public_jwk = jwk.serialize(private=False)  # no alg: RSA keys may sign RS256 or PS256
    if spec.auth_method == "tls_client_auth":  # the CA-signed certificate of the JSON's client_cert_file
        files.cert_file, files.key_file = certs.ensure_client_cert(workdir, "client", client_id)
    if spec.auth_method == "self_signed_tls_client_auth":
        files.cert_file, files.key_file = certs.self_signed_cert(workdir, client_id, client_id)
        cert = x509.load_pem_x509_certificate(files.cert_file.read_bytes())
        jwk = ECKey(pub_key=cert.public_key(), use="sig").serialize(private=False)
        jwk["x5c"] = [base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()]
        files.public_jwk = jwk
    return files


def write_projected(directory: Path, name: str, data: bytes) -> None:
    """Writes directory/name as kubelet's atomic writer updates a projected volume: the file
    goes into a new timestamped directory (directory/..2024_01_31_12_00_00.XXXXXXXX, 0755, the
    file 0644), the symlink directory/..data is pointed at it by renaming a new symlink over it
    (atomic: a reader sees the old file or the new one), directory/name is the symlink
    ..data/name, and the older timestamped directories are removed."""
    directory.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()), dir=directory))
    fresh.chmod(0o755)
    fd = os.open(fresh / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as file:
        os.fchmod(file.fileno(), 0o644)
        file.write(data)
    data_link, new_link = directory / "..data", directory / "..data_tmp"
    new_link.unlink(missing_ok=True)
    os.symlink(fresh.name, new_link)
    os.replace(new_link, data_link)
    link = directory / name
    if not link.is_symlink():
        link.unlink(missing_ok=True)
        os.symlink(f"..data/{name}", link)
    for entry in os.scandir(directory):
        if entry.name.startswith("..") and entry.name not in (fresh.name, data_link.name, new_link.name) \
                and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)


class Platform:
    """The loopback platform whose JWTs the server trusts for workload identity federation, as
    a Kubernetes cluster's service-account issuer or GitHub Actions' OIDC issuer: issuer
    {issuer}/platform, an EC P-256 key (DIR/platform-key.pem, kid platform-1), and a token for
    PLATFORM_SUBJECT rewritten into DIR/platform/token every --platform-rotate seconds."""

    def __init__(self, workdir: Path, server_issuer: str, lifetime: int):
        self.issuer = f"{server_issuer}{PLATFORM_PATH}"
        self.audience = server_issuer
        self.key = _client_key(workdir / "platform-key.pem", "EC")
        self.directory = workdir / "platform"
        self.token_file = self.directory / "token"
        self.lifetime = lifetime

    def trusted(self) -> addons.TrustedIssuer:
        return addons.TrustedIssuer(self.issuer, self.key.public_key(), PLATFORM_KID)

    def jwks(self) -> dict:
        jwk = ECKey(pub_key=self.key.public_key(), kid=PLATFORM_KID, use="sig", alg="ES256")
        return {"keys": [jwk.serialize(private=False)]}

    def discovery(self) -> dict:
        # What a Kubernetes API server's service-account issuer discovery document says.
        return {"issuer": self.issuer, "jwks_uri": f"{self.issuer}/jwks", "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["ES256"]}

    def token(self, lifetime: float | None = None, issued_ago: float = 0, not_before_in: float = 0,
              sub: str = PLATFORM_SUBJECT, aud: str | list | None = None, iss: str | None = None) -> str:
        """A JWT signed with the platform key: iat = now - issued_ago, exp = iat + lifetime,
        nbf = now + not_before_in, a random jti."""
        now = int(time.time())
        iat = now - int(issued_ago)
        claims = {"iss": iss or self.issuer, "sub": sub, "aud": aud if aud is not None else [self.audience],
                  "iat": iat, "nbf": now + int(not_before_in), "exp": iat + int(self.lifetime if lifetime is None else lifetime),
                  "jti": secrets.token_urlsafe(16)}
        return addons.sign_es256({"alg": "ES256", "typ": "JWT", "kid": PLATFORM_KID}, claims, self.key)

    def write_token(self) -> None:
        write_projected(self.directory, "token", self.token().encode())

    def rotate(self, every: float) -> None:
        """Writes a fresh token every `every` seconds, forever (a daemon thread)."""
        while True:
            time.sleep(every)
            try:
                self.write_token()
            except Exception:
                traceback.print_exc(file=sys.stderr)


# -- idpyoidc


def idpy_configuration(issuer: str, workdir: Path, lifetime: int) -> dict:
    """The idpyoidc server configuration (see idpyoidc's OPConfiguration). Its key files are
    kept in DIR/idpy, so a restart signs with the same keys."""
    state = workdir / "idpy"
    crypt = {"kwargs": {"keys": {"key_defs": [{"type": "OCT", "use": ["enc"], "kid": "password"},
                                              {"type": "OCT", "use": ["enc"], "kid": "salt"}]},
                        "iterations": 1}}
    exchange_policy = {"function": validate_token_exchange_policy,
                       "kwargs": {"audience": EXCHANGE_TARGETS, "resource": EXCHANGE_TARGETS}}
    token_endpoint_methods = list(AUTHN_METHODS)
    return {
        "issuer": issuer,
        "httpc_params": {"verify": False},  # idpyoidc would only fetch request_uri, switched off
        "keys": {"private_path": str(state / "jwks.json"), "read_only": False, "uri_path": "jwks",
                 "key_defs": [{"type": "RSA", "use": ["sig"]}, {"type": "EC", "crv": "P-256", "use": ["sig"]}]},
        "token_handler_args": {
            "jwks_def": {"private_path": str(state / "token_jwks.json"), "read_only": False,
                         "key_defs": [{"type": "oct", "bytes": 24, "use": ["enc"], "kid": "code"}]},
            "code": {"kwargs": {"lifetime": 300, "crypt_conf": crypt}},
            "token": {"class": "idpy_addons.BoundJWTToken", "kwargs": {"lifetime": lifetime, "alg": "ES256"}},
            "refresh": {"class": "idpy_addons.BoundJWTToken", "kwargs": {"lifetime": 86400, "alg": "ES256"}},
            "id_token": {"class": "idpyoidc.server.token.id_token.IDToken", "kwargs": {"lifetime": lifetime}},
        },
        "cookie_handler": {
            "class": "idpyoidc.server.cookie_handler.CookieHandler",
            "kwargs": {"keys": {"private_path": str(state / "cookie_jwks.json"), "read_only": False,
                                "key_defs": [{"type": "OCT", "use": ["enc"], "kid": "enc"},
                                             {"type": "OCT", "use": ["sig"], "kid": "sig"}]},
                       "name": {"session": "idpy_session", "register": "idpy_rp",
                                "session_management": "idpy_sman"}},
        },
        "endpoint": {
            "provider_info": {"path": ".well-known/openid-configuration",
                              "class": "idpyoidc.server.oidc.provider_config.ProviderConfiguration",
                              "kwargs": {"client_authn_method": None}},
            "authorization": {"path": "authorization", "class": addons.AuthorizationEndpoint,
                              "kwargs": {"client_authn_method": ["pushed_authz", "public"],
                                         "response_types_supported": ["code"],
                                         "response_modes_supported": ["query"],
                                         "request_parameter_supported": False,
                                         "request_uri_parameter_supported": False}},
            "pushed_authorization": {"path": "par", "class": addons.PushedAuthorizationEndpoint,
                                     "kwargs": {"client_authn_method": token_endpoint_methods, "ttl": 90}},
            "token": {"path": "token", "class": addons.TokenEndpoint, "kwargs": {
                "client_authn_method": token_endpoint_methods,
                "revoke_refresh_on_issue": True,
                "grant_types_helpers": {
                    CODE: {"class": AccessTokenHelper, "kwargs": {}},
                    REFRESH: {"class": addons.RefreshGrant, "kwargs": {}},
                    PASSWORD: {"class": addons.PasswordGrant, "kwargs": {}},
                    CLIENT_CREDENTIALS: {"class": addons.ClientCredentialsGrant, "kwargs": {}},
                    TOKEN_EXCHANGE: {"class": addons.PlatformTokenExchange, "kwargs": {
                        "requested_token_types_supported": [ACCESS_TOKEN_TYPE, REFRESH_TOKEN_TYPE],
                        "default_requested_token_type": ACCESS_TOKEN_TYPE,
                        "policy": {"": exchange_policy},
                        "federated_targets": EXCHANGE_TARGETS}},
                    JWT_BEARER: {"class": addons.JWTBearerGrant, "kwargs": {"federated_targets": EXCHANGE_TARGETS}},
                }}},
            "userinfo": {"path": "userinfo", "class": "idpyoidc.server.oidc.userinfo.UserInfo",
                         "kwargs": {"client_authn_method": ["bearer_header"]}},
            # RFC 7591 dynamic client registration, open (no initial access token), and the
            # RFC 7592 read of a registration with its registration_access_token.
            "registration": {"path": "registration", "class": "idpyoidc.server.oidc.registration.Registration",
                             "kwargs": {"client_authn_method": None, "client_secret_expires": False}},
            "registration_read": {"path": "registration_api",
                                  "class": "idpyoidc.server.oidc.read_registration.RegistrationRead",
                                  "kwargs": {"client_authn_method": ["bearer_header"]}},
        },
        "authentication": {"auto": {"acr": ACR, "class": addons.AutoLogin,
                                    "kwargs": {"user": "alice", "passwords": USERS}}},
        "userinfo": {"class": UserInfo, "kwargs": {"db": {
            user: {"sub": user, **claims} for user, claims in USER_CLAIMS.items()}}},
        "authz": {"class": "idpyoidc.server.authz.AuthzHandling", "kwargs": {"grant_config": {
            "usage_rules": {
                "authorization_code": {"supports_minting": ["access_token", "refresh_token", "id_token"],
                                       "max_usage": 1, "expires_in": 300},
                # Token exchange mints new tokens from an access token.
                "access_token": {"supports_minting": ["access_token", "refresh_token"], "expires_in": lifetime},
                "refresh_token": {"supports_minting": ["access_token", "refresh_token", "id_token"],
                                  "expires_in": 86400},
            },
            "expires_in": 30 * 86400}}},
        "add_on": {"pkce": {"function": "idpyoidc.server.oauth2.add_on.pkce.add_support",
                            "kwargs": {"essential": True, "code_challenge_methods": {"S256": CC_METHOD["S256"]}}}},
        # sub is the user name ("alice"), not idpyoidc's default salted hash.
        "session_params": {"encrypter": crypt,
                           "sub_func": {"public": {"class": "idpyoidc.server.session.manager.RawID",
                                                   "kwargs": {}}}},
        "template_dir": str(state / "templates"),
    }


def registered_client(cinfo: dict) -> None:
    """What a client registered at /registration (RFC 7591) needs here beyond what idpyoidc
    stores: the authentication methods idpyoidc checks at each endpoint (from its
    token_endpoint_auth_method, default client_secret_basic as RFC 7591 §2 says) and the scopes,
    as the configured clients have them."""
    method = cinfo.setdefault("token_endpoint_auth_method", "client_secret_basic")
    cinfo.update({
        "client_authn_method": IDPY_AUTHN.get(method, [method]),
        "authorization_endpoint_client_authn_method": ["pushed_authz", "public"],
        "userinfo_endpoint_client_authn_method": ["bearer_header"],
        "allowed_scopes": SCOPES,
        "default_scopes": DEFAULT_SCOPES,
    })
    cinfo.setdefault("grant_types_supported", cinfo.get("grant_types") or [CODE])
    if not method.startswith("client_secret"):
        cinfo.pop("client_secret", None)


def federation_claims(issuer: str) -> dict:
    """What a federated client's platform JWT must carry: iss, sub and (in) aud."""
    return {"federated_issuer": f"{issuer}{PLATFORM_PATH}", "federated_subject": PLATFORM_SUBJECT,
            "federated_audience": issuer}


def build_idp(issuer: str, workdir: Path, args, clients: dict, ca_cert: x509.Certificate,
              federation: addons.Federation) -> Server:
    """idpyoidc's server with the clients registered and the add-ons of idpy_addons.py plugged in."""
    state = workdir / "idpy"
    state.mkdir(exist_ok=True)
    idp = Server(OPConfiguration(idpy_configuration(issuer, workdir, args.access_token_lifetime),
                                 base_path=str(state)), cwd=str(state))
    for path in state.glob("*.json"):  # private keys
        path.chmod(0o600)
    context = idp.context

    # Client authentication methods idpyoidc lacks, and stricter JWT assertion checks.
    methods = context.client_authn_methods
    methods["private_key_jwt"] = addons.StrictPrivateKeyJWT(context.unit_get)
    methods["client_secret_jwt"] = addons.StrictClientSecretJWT(context.unit_get)
    methods["tls_client_auth"] = addons.TlsClientAuth(context.unit_get, ca_cert)
    methods["self_signed_tls_client_auth"] = addons.SelfSignedTlsClientAuth(context.unit_get, ca_cert)
    methods[addons.FEDERATED_METHOD] = addons.FederatedClientAssertion(context.unit_get)
    context.federation = federation
    # A JWT assertion's aud: the issuer or the endpoint's URL (idpyoidc: the endpoint's only);
    # at PAR also the token endpoint (RFC 9126 §2).
    idp.get_endpoint("token").allowed_targets.append("")
    idp.get_endpoint("pushed_authorization").allowed_targets.extend(["", "token"])

    token = idp.get_endpoint("token")
    token.post_parse_request = [addons.pkce_for_codes_only(step) if step.__name__ == "post_token_parse" else step
                                for step in token.post_parse_request]
    token.post_parse_request.append(addons.token_binding)
    # PKCE is checked when a pushed request is used; check it when it is pushed too (RFC 9126 §2.1).
    authorization_checks = idp.get_endpoint("authorization").post_parse_request
    idp.get_endpoint("pushed_authorization").post_parse_request.extend(
        step for step in authorization_checks if step.__name__ == "post_authn_parse")
    # What idpyoidc's grant helpers look at to answer token_type DPoP for a request with a
    # verified proof (its own DPoP add-on is not used, see idpy_addons.py).
    context.add_on["dpop"] = {"algs_supported": addons.DPOP_ALGS}

    # idpyoidc's registration logs a summary of the new client's keys before it has any, which
    # fails (cryptojwt's IssuerNotFound) for a client without jwks: give it an empty key set first.
    registration = idp.get_endpoint("registration")
    register = registration.do_client_registration

    def do_client_registration(request, client_id, ignore=None):
        context.keyjar.return_issuer(client_id)
        return register(request, client_id, ignore)

    registration.do_client_registration = do_client_registration

    for client_id, spec in CLIENTS.items():
        if spec.mtls and not args.mtls:
            continue
        files = clients[client_id]
        idpy_methods = IDPY_AUTHN.get(spec.auth_method, [spec.auth_method])
        cinfo = {
            "client_id": client_id,
            "token_endpoint_auth_method": spec.auth_method,
            "client_authn_method": idpy_methods,
            "authorization_endpoint_client_authn_method": ["pushed_authz", "public"],
            "userinfo_endpoint_client_authn_method": ["bearer_header"],
            "redirect_uris": [(REDIRECT_URI, {})],
            "response_types_supported": ["code"],
            "grant_types_supported": spec.grant_types,
            "allowed_scopes": SCOPES,
            "default_scopes": DEFAULT_SCOPES,
            **spec.metadata,
        }
        if files.secret:
            cinfo["client_secret"] = files.secret
            context.keyjar.add_symmetric(client_id, files.secret)
        if files.public_jwk:
            cinfo["jwks"] = {"keys": [files.public_jwk]}
            context.keyjar.import_jwks(cinfo["jwks"], client_id)
        if spec.auth_method == "tls_client_auth":
            cinfo["tls_client_auth_subject_dn"] = certs.client_subject(client_id).rfc4514_string()
        if spec.federated:  # as an Entra federated identity credential: issuer, subject, audience
            cinfo.update(federation_claims(issuer))
        context.cdb[client_id] = cinfo

    info = context.provider_info
    info.update({
        "dpop_signing_alg_values_supported": addons.DPOP_ALGS,
        "grant_types_supported": list(addons.TokenEndpoint.helper_by_grant_type),
        "token_endpoint_auth_methods_supported": [
            "client_secret_basic", "client_secret_post", "client_secret_jwt", "private_key_jwt", "none",
            *(addons.TLS_METHODS if args.mtls else ())],
        "token_endpoint_auth_signing_alg_values_supported": ["ES256", "ES384", "RS256", "PS256", "HS256"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": SCOPES,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
        "authorization_response_iss_parameter_supported": True,
        "require_pushed_authorization_requests": False,
        # idpyoidc would fetch a request_uri that is not a PAR one: no network.
        "request_parameter_supported": False,
        "request_uri_parameter_supported": False,
    })
    for odd in ("authorization_endpoint_auth_methods", "pushed_authorization_request_endpoint_auth_methods",
                "token_endpoint_auth_methods", "userinfo_endpoint_auth_methods"):
        info.pop(odd, None)
    if args.mtls:
        info["tls_client_certificate_bound_access_tokens"] = True
        info["mtls_endpoint_aliases"] = {"token_endpoint": f"{issuer}/mtls/token",
                                         "pushed_authorization_request_endpoint": f"{issuer}/mtls/par"}
        idp.get_endpoint("token").extra_audiences = [f"{issuer}/mtls/token"]
        idp.get_endpoint("pushed_authorization").extra_audiences = [f"{issuer}/mtls/par", f"{issuer}/mtls/token"]
    return idp


# -- the test controls


class State:
    """The mode, the DPoP nonce and replay cache, and the statistics (with the federation's
    accepted JWT ids). `lock` also serializes the requests through idpyoidc, which is not
    thread-safe."""

    def __init__(self, federation: addons.Federation):
        self.lock = threading.RLock()
        self.mode = "normal"
        self.nonce = secrets.token_urlsafe(16)
        self.replay = addons.ReplayCache()
        self.federation = federation
        self.reset()

    def reset(self) -> None:
        self.requests = collections.Counter()
        self.counts = collections.Counter()
        self.client_auth = {}
        self.last_token_request = None
        self.federation.clear()

    def stats(self) -> dict:
        return {"mode": self.mode, "requests": dict(self.requests),
                **{name: self.counts[name] for name in (
                    "token_requests", "par_requests", "authorization_requests", "resource_requests",
                    "dpop_proofs", "dpop_proofs_refused", "nonce_challenges", "registrations",
                    "deregistrations")},
                "client_auth": dict(self.client_auth), "last_token_request": self.last_token_request,
                "federation": {use: list(jtis) for use, jtis in self.federation.accepted.items()}}


@dataclass
class Answer:
    status: int
    body: dict | str | bytes | None = None
    headers: dict = field(default_factory=dict)


def oauth_error(status: int, error: str, description: str = "", headers: dict | None = None) -> Answer:
    body = {"error": error, **({"error_description": description} if description else {})}
    return Answer(status, body, headers or {})


# -- HTTP


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "idpy"
    note = ""  # what the request's log line adds

    def version_string(self) -> str:
        return self.server_version

    @property
    def state(self) -> State:
        return self.server.state

    @property
    def idp(self) -> Server:
        return self.server.idp

    def url(self) -> str:
        """This request's URL without its query: the issuer's origin and the path."""
        return self.server.issuer + self.path.split("?", 1)[0]

    def dispatch(self) -> None:
        self.note = ""
        path = self.path.split("?", 1)[0]
        self.body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route = ROUTES.get((self.command, path))
        if route is None:
            known = any(known_path == path for _, known_path in ROUTES)
            return self.send(Answer(405, {"error": "method_not_allowed"}) if known
                             else Answer(404, {"error": "not_found"}))
        if path.startswith(PLATFORM_PATH + "/"):  # the platform: no idpyoidc, no lock, not counted
            return self.send(route(self))
        der = self.connection.getpeercert(binary_form=True)
        with self.state.lock:
            if not path.startswith("/test/"):
                self.state.requests[f"{self.command} {path}"] += 1
            addons.CURRENT.reset(x509.load_der_x509_certificate(der) if der else None)
            try:
                answer = route(self)
            except Exception:
                traceback.print_exc(file=sys.stderr)
                answer = oauth_error(500, "server_error", "see the server's log")
        if not self.note and isinstance(answer.body, dict) and "error" in answer.body:
            self.note = f"{answer.body['error']}: {answer.body.get('error_description', '')}"
        self.send(answer)

    do_GET = do_POST = do_DELETE = dispatch

    def send(self, answer: Answer) -> None:
        body = answer.body
        content_type = "application/json"
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        elif body is None:
            body, content_type = b"", None
        self.send_response(answer.status)
        headers = {"Cache-Control": "no-store", **answer.headers}
        if content_type and "Content-Type" not in headers:
            headers["Content-Type"] = content_type
        headers["Content-Length"] = str(len(body))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_request(self, code="-", size="-") -> None:
        path = self.path.split("?", 1)[0]  # the authorization query is no secret, but long
        sys.stderr.write(f"idpy [{self.state.mode}] {self.command} {path} {code} {self.note}\n")

    def log_message(self, format, *args) -> None:
        sys.stderr.write(f"idpy {self.address_string()} {format % args}\n")

    # -- glue to idpyoidc

    def http_info(self) -> dict:
        headers = {name.lower(): value for name, value in self.headers.items() if name.lower() != "cookie"}
        return {"headers": headers, "method": self.command, "url": self.url(), "cookie": []}

    def form(self) -> dict:
        return dict(parse_qsl(self.body.decode("utf-8", "replace"), keep_blank_values=True))

    def query(self) -> dict:
        return dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True))

    def run_endpoint(self, name: str, request, **process_args) -> tuple[Answer | None, object, object]:
        """parse_request and process_request of an idpyoidc endpoint. Returns (an error answer
        or None, the parsed request, process_request's result)."""
        endpoint = self.idp.get_endpoint(name)
        http_info = self.http_info()
        try:
            parsed = endpoint.parse_request(request, http_info=http_info)
        except ClientAuthenticationError as error:
            return self.client_error(str(error) or type(error).__name__), None, None
        except (OidcMsgError, ValueError, KeyError) as error:  # a missing or malformed parameter
            return oauth_error(400, "invalid_request", f"{type(error).__name__}: {error}"), None, None
        if isinstance(parsed, ResponseMessage) and "error" in parsed:
            return self.error_answer(parsed.to_dict()), parsed, None
        try:
            result = endpoint.process_request(parsed, http_info=http_info, **process_args)
        except KeyError as error:  # idpyoidc reads some parameters without checking (redirect_uri)
            return oauth_error(400, "invalid_request", f"missing parameter {error}"), parsed, None
        if isinstance(result, ResponseMessage) and "error" in result:
            return self.error_answer(result.to_dict()), parsed, None
        if isinstance(result, dict) and isinstance(result.get("response_args"), ResponseMessage) \
                and "error" in result["response_args"] and name != "authorization":
            return self.error_answer(result["response_args"].to_dict()), parsed, None
        return None, parsed, result

    def client_error(self, description: str) -> Answer:
        failures = addons.CURRENT.authn_failures
        if any(failure.startswith(f"{addons.FEDERATED_METHOD} failed") for failure in failures):
            # Why the platform's JWT was refused, without the public method's "Allowed methods".
            failures = [failure for failure in failures if not failure.startswith("Allowed methods")]
        if failures:  # more precise than idpyoidc's "Authorization failed"
            description = "; ".join(failures)
        headers = {"WWW-Authenticate": 'Basic realm="idpy"'} if "Basic " in (self.headers.get("Authorization") or "") else {}
        return oauth_error(401, "invalid_client", description, headers)

    def error_answer(self, document: dict) -> Answer:
        document = {k: v for k, v in document.items() if k in ("error", "error_description", "error_uri")}
        if document.get("error") == "invalid_client":
            return self.client_error(document.get("error_description", ""))
        return Answer(400, document)

    # -- DPoP

    def proof_header(self) -> str | None:
        values = self.headers.get_all("DPoP") or []
        if len(values) > 1:
            raise addons.DPoPError("more than one DPoP header")
        return values[0] if values else None

    def endpoint_proof(self, modes: bool = True) -> Answer | None:
        """Checks the DPoP proof of a token (or PAR) request, if it has one, under the current
        mode (modes=False: PAR, which the modes leave alone); an answer to send instead of
        going on, or None (CURRENT.dpop set if there was a proof)."""
        state = self.state
        try:
            proof_jwt = self.proof_header()
            if proof_jwt is None:
                return None
            state.counts["dpop_proofs"] += 1
            if modes and state.mode == "refuse-dpop":
                raise addons.DPoPError("DPoP proofs are refused (test mode refuse-dpop)")
            proof = addons.verify_dpop_proof(proof_jwt, "POST", self.url())
        except addons.DPoPError as error:
            state.counts["dpop_proofs_refused"] += 1
            self.note = f"invalid_dpop_proof: {error}"
            return oauth_error(400, "invalid_dpop_proof", str(error))
        wants_nonce = state.mode == "nonce-always" or (state.mode == "require-nonce" and proof.nonce != state.nonce)
        if modes and wants_nonce:
            if state.mode == "nonce-always":
                state.nonce = secrets.token_urlsafe(16)
            state.counts["nonce_challenges"] += 1
            self.note = "use_dpop_nonce"
            return oauth_error(400, "use_dpop_nonce", "the DPoP proof must carry the server's nonce",
                               {"DPoP-Nonce": state.nonce})
        if not state.replay.check_and_add(f"{proof.jkt}:{proof.claims['jti']}", time.time()):
            state.counts["dpop_proofs_refused"] += 1
            return oauth_error(400, "invalid_dpop_proof", "the proof's jti was used before")
        addons.CURRENT.dpop = proof
        return None

    def protected(self) -> tuple[Answer | None, dict]:
        """Checks the access token of a request to a protected resource as a resource server
        does (RFC 6750, RFC 9449 §7, RFC 8705 §3): an answer to refuse with, or None and
        {"token", "payload", "session"}."""
        state = self.state
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        scheme, token = scheme.lower(), token.strip()
        algs = " ".join(addons.DPOP_ALGS)

        def refuse(error: str, description: str, dpop: bool, headers: dict | None = None) -> Answer:
            self.note = f"{error}: {description}"
            challenge = (f'DPoP error="{error}", error_description="{description}", algs="{algs}"' if dpop
                         else f'Bearer error="{error}", error_description="{description}"')
            return oauth_error(401, error, description, {"WWW-Authenticate": challenge, **(headers or {})})

        if scheme not in ("bearer", "dpop") or not token:
            return Answer(401, {"error": "invalid_request", "error_description": "no access token"},
                          {"WWW-Authenticate": f'Bearer, DPoP algs="{algs}"'}), {}
        manager = self.idp.context.session_manager
        try:
            payload = manager.token_handler["access_token"].get_payload(token)
            session = manager.get_session_info_by_token(token, grant=True, handler_key="access_token")
            issued = manager.find_token(session["branch_id"], token)
            if issued is None or not issued.is_active() or payload.get("exp", 0) <= time.time():
                raise ValueError("inactive")
        except Exception:
            return refuse("invalid_token", "unknown, expired or revoked access token", scheme == "dpop"), {}
        cnf = payload.get("cnf") or {}
        if "jkt" in cnf:
            if scheme != "dpop":
                return refuse("invalid_token", "a DPoP-bound token must be sent with the DPoP scheme", True), {}
            try:
                proof_jwt = self.proof_header()
                if proof_jwt is None:
                    raise addons.DPoPError("no DPoP proof")
                state.counts["dpop_proofs"] += 1
                proof = addons.verify_dpop_proof(proof_jwt, self.command, self.url(), access_token=token)
                if proof.jkt != cnf["jkt"]:
                    raise addons.DPoPError("the proof's key is not the one the token is bound to")
            except addons.DPoPError as error:
                state.counts["dpop_proofs_refused"] += 1
                return refuse("invalid_dpop_proof", str(error), True), {}
            if state.mode == "resource-nonce" and proof.nonce != state.nonce:
                state.counts["nonce_challenges"] += 1
                return refuse("use_dpop_nonce", "the DPoP proof must carry the server's nonce", True,
                              {"DPoP-Nonce": state.nonce}), {}
            if not state.replay.check_and_add(f"{proof.jkt}:{proof.claims['jti']}", time.time()):
                return refuse("invalid_dpop_proof", "the proof's jti was used before", True), {}
        elif scheme == "dpop":
            return refuse("invalid_token", "the token is not DPoP-bound: use the Bearer scheme", True), {}
        if "x5t#S256" in cnf:
            peer = addons.CURRENT.peer_cert
            if peer is None or addons.cert_thumbprint(peer) != cnf["x5t#S256"]:
                return refuse("invalid_token", "the token is bound to another TLS client certificate",
                              "jkt" in cnf), {}
        return None, {"token": token, "payload": payload, "session": session}

    # -- endpoints

    def discovery(self) -> Answer:
        _, _, result = self.run_endpoint("provider_config", {})
        document = dict(result["response_args"])
        if self.state.mode == "no-registration":
            document.pop("registration_endpoint", None)
        return Answer(200, document)

    def jwks(self) -> Answer:
        return Answer(200, self.idp.context.keyjar.export_jwks())

    def token(self) -> Answer:
        state = self.state
        state.counts["token_requests"] += 1
        form = self.form()
        basic = self.headers.get("Authorization") or ""
        claimed = form.get("client_id")
        if basic.startswith("Basic "):
            try:
                claimed = base64.b64decode(basic[6:]).decode().split(":", 1)[0]
            except ValueError:
                pass
        record = {"path": self.path, "client_id": claimed, "grant_type": form.get("grant_type"),
                  "auth_method": None, "dpop_jkt": None, "status": None, "error": None}
        answer = self.endpoint_proof()
        if answer is None:
            answer, parsed, result = self.run_endpoint("token", self.body.decode("utf-8", "replace"),
                                                       issue_refresh=True)
            if answer is None:
                response = self.idp.get_endpoint("token").do_response(request=parsed, **result)
                answer = Answer(200, response["response"])
        current = addons.CURRENT
        if current.client_id:
            method = addons.AUTH_METHOD_NAMES.get(current.auth_method, current.auth_method)
            state.client_auth[current.client_id] = method
            record.update(client_id=current.client_id, auth_method=method)
        record.update(dpop_jkt=current.dpop.jkt if current.dpop else None, status=answer.status,
                      error=answer.body.get("error") if isinstance(answer.body, dict) else None)
        state.last_token_request = record
        if not self.note:
            self.note = " ".join(f"{k}={record[k]}" for k in ("client_id", "grant_type", "auth_method") if record[k])
            if record["error"]:
                self.note += f" {record['error']}: {answer.body.get('error_description', '')}"
        return answer

    def par(self) -> Answer:
        state = self.state
        state.counts["par_requests"] += 1
        if state.mode == "par-fail":
            return oauth_error(500, "server_error", "test mode par-fail")
        if state.mode == "par-error":
            return oauth_error(400, "invalid_request", "test mode par-error")
        # A DPoP proof binds the code to its key (RFC 9449 §10), as the dpop_jkt parameter does.
        body = self.body.decode("utf-8", "replace")
        answer = self.endpoint_proof(modes=False)
        if answer is not None:
            return answer
        proof = addons.CURRENT.dpop
        if proof is not None:
            dpop_jkt = self.form().get("dpop_jkt")
            if dpop_jkt not in (None, proof.jkt):
                return oauth_error(400, "invalid_dpop_proof", "dpop_jkt is not the thumbprint of the proof's key")
            if dpop_jkt is None:
                body += "&" + urlencode({"dpop_jkt": proof.jkt})
        answer, _, result = self.run_endpoint("pushed_authorization", body)
        current = addons.CURRENT
        if current.client_id:
            state.client_auth[current.client_id] = addons.AUTH_METHOD_NAMES.get(current.auth_method,
                                                                                 current.auth_method)
        if answer is not None:
            return answer
        pushed = result["http_response"]
        self.server.pushed[pushed["request_uri"]] = time.time() + pushed["expires_in"]
        self.note = f"client_id={current.client_id}"
        return Answer(201, pushed)

    def authorization(self) -> Answer:
        """GET /authorization: alice is signed in at once, so this answers 302 to the redirect
        URI with code, state and iss (or with error=...), or 400 when there is no redirect URI
        to trust (unknown client, PAR required, unknown request_uri)."""
        self.state.counts["authorization_requests"] += 1
        query = self.query()
        context = self.idp.context
        client_id = query.get("client_id", "")
        cinfo = context.cdb.get(client_id)
        if cinfo is None:
            return oauth_error(400, "invalid_client", "unknown client_id")
        request_uri = query.get("request_uri")
        if request_uri:
            pushed = context.par_db.get(request_uri)
            expires = self.server.pushed.get(request_uri, 0)
            if pushed is None or expires < time.time():
                context.par_db.pop(request_uri, None)
                return oauth_error(400, "invalid_request", "unknown, used or expired request_uri")
            if pushed.get("client_id") != client_id:
                return oauth_error(400, "invalid_request", "the request_uri was pushed by another client")
            # idpyoidc resolves request_uri (and forgets it: single use) after checking the
            # parameters it was sent with: send it the pushed ones, but no client credentials.
            query = {name: value for name, value in pushed.to_dict().items()
                     if name not in PUSHED_CREDENTIALS and not name.startswith("__")}
            query.update(client_id=client_id, request_uri=request_uri)
        elif cinfo.get("require_pushed_authorization_requests"):
            return oauth_error(400, "invalid_request", "this client must use pushed authorization requests")
        endpoint = self.idp.get_endpoint("authorization")
        answer, parsed, result = self.run_endpoint("authorization", query)
        if answer is not None:
            return self.authorization_error(answer, query)
        if "response_args" not in result:  # an error from setup_auth, like login_required
            result = endpoint.error_response({"return_uri": result.get("return_uri", parsed.get("redirect_uri"))},
                                             parsed, result.get("error", "server_error"),
                                             result.get("error_description", ""))
        response = endpoint.do_response(request=parsed, **result)
        self.note = f"client_id={client_id}"
        return Answer(302, None, {"Location": response["response"]})

    def authorization_error(self, answer: Answer, query: dict) -> Answer:
        """An error of the authorization endpoint: sent to the redirect URI (RFC 6749 §4.1.2.1)
        when it is one of the client's, else answered with 400."""
        redirect_uri, context = query.get("redirect_uri"), self.idp.context
        addons.allow_loopback_redirect(context, query.get("client_id", ""), redirect_uri)
        registered = [uri if isinstance(uri, str) else uri[0]
                      for uri in (context.cdb.get(query.get("client_id", "")) or {}).get("redirect_uris", [])]
        if not isinstance(answer.body, dict) or redirect_uri not in registered:
            return answer
        params = {**answer.body, "iss": self.server.issuer, **({"state": query["state"]} if "state" in query else {})}
        self.note = f"error={answer.body.get('error')} (redirected)"
        separator = "&" if "?" in redirect_uri else "?"
        return Answer(302, None, {"Location": f"{redirect_uri}{separator}{urlencode(params)}"})

    def userinfo(self) -> Answer:
        refusal, checked = self.protected()
        if refusal is not None:
            return refusal
        # idpyoidc's userinfo endpoint takes Bearer only; the DPoP proof was checked above.
        self.headers.replace_header("Authorization", f"Bearer {checked['token']}")
        answer, parsed, result = self.run_endpoint("userinfo", {})
        if answer is not None:  # (the token was checked above: unlikely)
            return answer if answer.status != 400 else Answer(401, answer.body, {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        response = self.idp.get_endpoint("userinfo").do_response(request=parsed, **result)
        return Answer(200, response["response"])

    def resource(self) -> Answer:
        self.state.counts["resource_requests"] += 1
        refusal, checked = self.protected()
        if refusal is not None:
            return refusal
        payload = checked["payload"]
        self.note = f"client_id={payload.get('client_id')}"
        return Answer(200, {"sub": payload.get("sub") or checked["session"]["user_id"],
                            "client_id": payload.get("client_id") or checked["session"]["client_id"],
                            "scope": payload.get("scope"),
                            "token_type": "DPoP" if "jkt" in (payload.get("cnf") or {}) else "Bearer",
                            "cnf": payload.get("cnf")})

    # -- dynamic client registration

    def register(self) -> Answer:
        """POST /registration: idpyoidc's RFC 7591 registration, then what this server's other
        clients have that idpyoidc leaves out (see registered_client)."""
        if self.state.mode == "initial-access-token":
            scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
            if scheme != "Bearer" or not secrets.compare_digest(token.encode(), self.state.nonce.encode()):
                return Answer(401, {"error": "invalid_token"}, {"WWW-Authenticate": 'Bearer error="invalid_token"'})
            del self.headers["Authorization"]
        answer, _, result = self.run_endpoint("registration", self.body.decode("utf-8", "replace"))
        if answer is not None:
            return answer
        self.state.counts["registrations"] += 1
        response = dict(result["response_args"])
        cinfo = self.idp.context.cdb[response["client_id"]]
        registered_client(cinfo)
        if not cinfo["token_endpoint_auth_method"].startswith("client_secret"):  # a secret only to use one
            response.pop("client_secret", None)
            response.pop("client_secret_expires_at", None)
        self.note = f"client_id={response['client_id']} auth_method={cinfo['token_endpoint_auth_method']}"
        return Answer(201, response)

    def registered(self) -> tuple[Answer | None, str]:
        """The client of the registration_client_uri's client_id, when the request's Bearer
        token is its registration_access_token (RFC 7592 §3: else 401 invalid_token)."""
        client_id = self.query().get("client_id", "")
        authorization = self.headers.get("Authorization") or ""
        token = authorization[7:] if authorization.startswith("Bearer ") else ""
        cinfo = self.idp.context.cdb.get(client_id)
        if not token or cinfo is None or not secrets.compare_digest(cinfo.get("registration_access_token", ""), token):
            return Answer(401, {"error": "invalid_token"}, {"WWW-Authenticate": 'Bearer error="invalid_token"'}), client_id
        return None, client_id

    def read_registration(self) -> Answer:
        """GET /registration_api?client_id=ID: RFC 7592 §2.1, idpyoidc's registration_read."""
        refusal, client_id = self.registered()
        if refusal is not None:
            return refusal
        # The token was checked above (idpyoidc's own check applies the client's token endpoint
        # authentication methods to this endpoint too).
        result = self.idp.get_endpoint("registration_read").process_request({"client_id": client_id})
        return Answer(200, dict(result["response_args"]))

    def delete_registration(self) -> Answer:
        """DELETE /registration_api?client_id=ID: RFC 7592 §2.3, which idpyoidc 5.0.0 does not
        implement (it has registration and registration_read only). The client is removed from
        the client database with its keys and registration access token: its token requests
        then fail invalid_client. 204 with no body; an unknown client or a wrong token 401."""
        refusal, client_id = self.registered()
        if refusal is not None:
            return refusal
        context = self.idp.context
        cinfo = context.cdb.pop(client_id)
        context.registration_access_token.pop(cinfo.get("registration_access_token"), None)
        if client_id in context.keyjar:
            del context.keyjar[client_id]
        self.state.counts["deregistrations"] += 1
        self.note = f"client_id={client_id} deleted"
        return Answer(204, None)

    # -- control

    def get_mode(self) -> Answer:
        return Answer(200, {"mode": self.state.mode, "nonce": self.state.nonce})

    def set_mode(self) -> Answer:
        try:
            document = json.loads(self.body) if self.body.lstrip().startswith(b"{") else self.form()
        except ValueError:
            document = {}
        mode = document.get("mode")
        if mode not in MODES:
            return Answer(400, {"error": f"unknown mode {mode!r}", "modes": sorted(MODES)})
        self.state.mode = mode
        self.state.nonce = secrets.token_urlsafe(16)
        return self.get_mode()

    def stats(self) -> Answer:
        return Answer(200, self.state.stats())

    def reset(self) -> Answer:
        self.state.reset()
        return Answer(200, self.state.stats())

    def platform_token(self) -> Answer:
        """POST /test/platform-token: a JWT signed by the platform key, with the claims the
        JSON body asks for (see the module's docstring)."""
        try:
            document = json.loads(self.body) if self.body.strip() else {}
        except ValueError:
            document = None
        if not isinstance(document, dict):
            return oauth_error(400, "invalid_request", "the body must be a JSON object")
        arguments = {}
        for name in ("lifetime", "issued_ago", "not_before_in"):
            value = document.get(name)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                return oauth_error(400, "invalid_request", f"{name} must be a number of seconds")
            if value is not None:
                arguments[name] = value
        for name in ("sub", "iss"):
            if document.get(name) is not None and not isinstance(document[name], str):
                return oauth_error(400, "invalid_request", f"{name} must be a string")
            if document.get(name) is not None:
                arguments[name] = document[name]
        aud = document.get("aud")
        if aud is not None:
            if not (isinstance(aud, str) or (isinstance(aud, list) and all(isinstance(a, str) for a in aud))):
                return oauth_error(400, "invalid_request", "aud must be a string or a list of strings")
            arguments["aud"] = aud
        self.note = " ".join(f"{name}={value}" for name, value in arguments.items())
        return Answer(200, {"token": self.server.platform.token(**arguments)})

    # -- the platform

    def platform_jwks(self) -> Answer:
        return Answer(200, self.server.platform.jwks())

    def platform_discovery(self) -> Answer:
        return Answer(200, self.server.platform.discovery())


ROUTES = {
    ("GET", "/.well-known/openid-configuration"): Handler.discovery,
    ("GET", "/.well-known/oauth-authorization-server"): Handler.discovery,
    ("GET", "/jwks"): Handler.jwks,
    ("GET", "/authorization"): Handler.authorization,
    ("POST", "/par"): Handler.par,
    ("POST", "/mtls/par"): Handler.par,
    ("POST", "/token"): Handler.token,
    ("POST", "/mtls/token"): Handler.token,
    ("GET", "/userinfo"): Handler.userinfo,
    ("POST", "/userinfo"): Handler.userinfo,
    ("GET", "/resource"): Handler.resource,
    ("POST", "/registration"): Handler.register,
    ("GET", "/registration_api"): Handler.read_registration,
    ("DELETE", "/registration_api"): Handler.delete_registration,
    ("GET", "/test/mode"): Handler.get_mode,
    ("POST", "/test/mode"): Handler.set_mode,
    ("GET", "/test/stats"): Handler.stats,
    ("POST", "/test/reset"): Handler.reset,
    ("POST", "/test/platform-token"): Handler.platform_token,
    ("GET", PLATFORM_PATH + "/jwks"): Handler.platform_jwks,
    ("GET", PLATFORM_PATH + "/.well-known/openid-configuration"): Handler.platform_discovery,
}


def main() -> None:
    args = parse_args()
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="idpy %(name)s: %(message)s")
    # idpyoidc logs requests and headers (secrets) at INFO and configuration chatter at WARNING.
    # Its error messages may quote a token.
    logging.getLogger("idpyoidc").setLevel(logging.CRITICAL)
    addons.capture_authn_failures()

    ca_file, _, _ = certs.ensure_tls(workdir)
    client_cert, client_key = certs.ensure_client_cert(workdir, "client", "authgate-mtls")
    ca_cert = x509.load_pem_x509_certificate(ca_file.read_bytes())
    clients = {client_id: prepare_client(workdir, client_id, spec) for client_id, spec in CLIENTS.items()
               if args.mtls or not spec.mtls}
    service_account_key_file = workdir / "authgate-sa-key.pem"
    service_account_key = _client_key(service_account_key_file, "EC")

    def tls(context: ssl.SSLContext) -> None:
        if not args.mtls:
            return
        # Client certificates are asked for, not required (the other clients have none), and
        # must chain to the test CA or be one of the registered self-signed ones (trusted as
        # they are: partial chains).
        context.verify_mode = ssl.CERT_OPTIONAL
        trusted = ca_file.read_text() + "".join(
            files.cert_file.read_text() for files in clients.values() if files.cert_file)
        context.load_verify_locations(cadata=trusted)
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN

    def configure(server) -> None:
        issuer = server.issuer
        server.platform = platform = Platform(workdir, issuer, args.platform_token_lifetime)
        platform.write_token()  # before the ready line
        token_endpoints = [f"{issuer}/token", *([f"{issuer}/mtls/token"] if args.mtls else [])]
        federation = addons.Federation(issuer, token_endpoints, platform.trusted(), addons.TrustedIssuer(
            SERVICE_ACCOUNT, service_account_key.public_key(), SERVICE_ACCOUNT_KID, service_account=True))
        server.state = State(federation)
        server.pushed = {}  # PAR request_uri -> when it expires
        server.idp = build_idp(issuer, workdir, args, clients, ca_cert, federation)
        threading.Thread(target=platform.rotate, args=(args.platform_rotate,), name="platform-token",
                         daemon=True).start()

    def ready(server) -> dict:
        issuer = server.issuer
        document = {
            "port": server.server_address[1],
            "issuer": issuer,
            "ca_file": str(ca_file),
            "workdir": str(workdir),
            "client_cert_file": str(client_cert),
            "client_key_file": str(client_key),
            "clients": {
                client_id: {
                    "auth_method": CLIENTS[client_id].auth_method,
                    "grant_types": CLIENTS[client_id].grant_types,
                    "secret_file": str(files.secret_file) if files.secret_file else None,
                    "key_file": str(files.key_file) if files.key_file else None,
                    "key_id": files.key_id,
                    **({"cert_file": str(files.cert_file)} if files.cert_file else {}),
                    **(federation_claims(issuer) if CLIENTS[client_id].federated else {}),
                }
                for client_id, files in clients.items()
            },
            "users": dict(USERS),
            "platform": {
                "issuer": server.platform.issuer,
                "token_file": str(server.platform.token_file),
                "subject": PLATFORM_SUBJECT,
                "audience": issuer,
                "jwks": f"{server.platform.issuer}/jwks",
            },
            "service_account": {
                "issuer": SERVICE_ACCOUNT,
                "key_file": str(service_account_key_file),
                "key_id": SERVICE_ACCOUNT_KID,
            },
            "endpoints": {
                "discovery": f"{issuer}/.well-known/openid-configuration",
                "authorization": f"{issuer}/authorization",
                "par": f"{issuer}/par",
                "token": f"{issuer}/token",
                "userinfo": f"{issuer}/userinfo",
                "jwks": f"{issuer}/jwks",
                "resource": f"{issuer}/resource",
                "control": f"{issuer}/test/mode",
                "stats": f"{issuer}/test/stats",
                "registration": f"{issuer}/registration",
                "platform_token": f"{issuer}/test/platform-token",
            },
        }
        if args.mtls:
            document["endpoints"].update(mtls_token=f"{issuer}/mtls/token", mtls_par=f"{issuer}/mtls/par")
        return document

    loopback.serve(Handler, workdir, port=args.port, configure=configure, tls=tls, ready=ready)


if __name__ == "__main__":
    main()
