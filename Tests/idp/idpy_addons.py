"""What idpy_server.py adds to idpyoidc 5.0.0's authorization server, and the DPoP proof checks.

idpyoidc does the OAuth 2.0 / OpenID Connect work (client authentication, codes, PKCE, PAR,
token minting, token exchange, ID tokens, userinfo); this module plugs into its extension
points what it lacks or gets wrong in 5.0.0:

  - DPoP (RFC 9449): idpyoidc's add-on checks a proof's signature, htm and htu only (no iat,
    jti, nonce or key checks), hashes ath in hex instead of base64url, its add_support() never
    hooks the token endpoint, and the server metadata it sets is overwritten. The proofs are
    verified here (verify_dpop_proof) and idpyoidc only gets the verified key thumbprint as the
    request's "dpop_jkt", which its grant helpers turn into token_type DPoP. token_binding
    refuses a DPoP client's request without a proof and checks the key of a bound code
    (dpop_jkt, §10) or of a public client's refresh token (§5).
  - cnf claims: idpyoidc copies a grant's last DPoP key into every later token of that grant,
    even one asked for without a proof. BoundJWTToken writes exactly the binding of the
    request being answered: cnf.jkt (DPoP) and cnf.x5t#S256 (mutual TLS, RFC 8705).
  - tls_client_auth and self_signed_tls_client_auth (RFC 8705), which idpyoidc lacks.
  - Stricter JWT client assertions (RFC 7523 §3): idpyoidc accepts an assertion without exp,
    without jti or with sub != iss; and it only logs why it refused one (AuthnFailures keeps
    the reasons for the error_description).
  - The password and client_credentials grants: idpyoidc's helpers answer token_type
    "access_token", compare a client_secret the request need not have, never issue refresh or
    ID tokens, and sign a token with no sub or client_id. These create an ordinary session.
  - Error codes of RFC 6749 §5.2 where idpyoidc says invalid_request: invalid_grant for a used
    refresh token, unauthorized_client / unsupported_grant_type for a grant type.
  - RFC 8252 loopback redirect URIs (any port), require_pushed_authorization_requests, and the
    PKCE check idpyoidc also runs on grants it does not know (it fails the password grant).
  - Workload identity federation, which idpyoidc lacks: Federation verifies the JWTs of the
    trusted "platform" issuer and service account (ES256, by hand); FederatedClientAssertion
    authenticates a client with a platform JWT (Entra's federated credentials, Keycloak's
    federated client authentication); JWTBearerGrant is RFC 7523 §2.1's grant;
    PlatformTokenExchange exchanges a platform JWT (RFC 8693) and leaves idpyoidc the
    exchange of its own access tokens.

Everything request-specific (the TLS client certificate, the verified DPoP proof, the client
authentication method used) travels in CURRENT, a thread-local the HTTP layer fills; the
HTTP layer runs one request at a time through idpyoidc (which is not thread-safe).
"""

import base64
import collections
import hashlib
import hmac
import json
import logging
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from cryptojwt.jwk.jwk import key_from_jwk_dict
from cryptojwt.jws.jws import JWS

from idpyoidc.exception import MissingRequiredAttribute, MissingRequiredValue
from idpyoidc.message import Message
from idpyoidc.message.oauth2 import TokenExchangeRequest
from idpyoidc.message.oidc import AuthorizationRequest, TokenErrorResponse
from idpyoidc.server.authn_event import create_authn_event
from idpyoidc.server.client_authn import ClientAuthnMethod, ClientSecretJWT, PrivateKeyJWT
from idpyoidc.server.exception import ClientAuthenticationError, FailedAuthentication
from idpyoidc.server.oauth2.pushed_authorization import PushedAuthorization
from idpyoidc.server.oauth2.token_helper import TokenEndpointHelper
from idpyoidc.server.oidc.authorization import Authorization as OIDCAuthorization
from idpyoidc.server.oidc.token import Token
from idpyoidc.server.oidc.token_helper.access_token import AccessTokenHelper
from idpyoidc.server.oidc.token_helper.refresh_token import RefreshTokenHelper
from idpyoidc.server.oidc.token_helper.token_exchange import TokenExchangeHelper
from idpyoidc.server.token.jwt_token import JWTToken
from idpyoidc.server.user_authn.user import NoAuthn
from idpyoidc.time_util import utc_time_sans_frac

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
# The subject_token_types of a platform JWT at the token exchange (RFC 8693 §3).
FEDERATED_TOKEN_TYPES = ("urn:ietf:params:oauth:token-type:jwt", "urn:ietf:params:oauth:token-type:id_token")
# The client authentication method of a client that authenticates with a platform JWT.
FEDERATED_METHOD = "federated_client_assertion"
# How far a platform or service-account JWT's nbf and iat may lie ahead of the server's clock.
FEDERATION_LEEWAY = 30
# The longest a service-account assertion may live (exp - iat), as Google's OAuth 2.0 for
# service accounts allows.
SERVICE_ACCOUNT_MAX_LIFETIME = 3600
# How many accepted JWT ids the statistics keep, per use.
FEDERATION_KEPT = 200
# The DPoP proof algorithms accepted (and advertised): asymmetric only, as RFC 9449 §4.2 requires.
DPOP_ALGS = ["ES256", "ES384", "ES512", "RS256", "PS256", "EdDSA"]
# How far a proof's iat may lie from the server's clock (RFC 9449 §11.1).
DPOP_MAX_AGE = 60
DPOP_MAX_FUTURE = 60
# The names of the TLS client authentication methods (RFC 8705 §2).
TLS_METHODS = ("tls_client_auth", "self_signed_tls_client_auth")
# idpyoidc's name for "no client authentication" and the registered (RFC 7591) one.
AUTH_METHOD_NAMES = {"public": "none"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cert_thumbprint(cert: x509.Certificate) -> str:
    """x5t#S256 of a certificate (RFC 8705 §3.1): base64url(SHA-256(DER))."""
    return b64url(hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest())


# -- what one request carries through idpyoidc


class RequestContext(threading.local):
    """The current request's facts that idpyoidc's interfaces have no room for."""

    def reset(self, peer_cert: x509.Certificate | None = None) -> None:
        self.peer_cert = peer_cert  # the verified TLS client certificate, if one was presented
        self.dpop = None            # the verified DPoP proof (DPoPProof), if one was sent
        self.auth_method = None     # how the client authenticated ("private_key_jwt", "none", ...)
        self.client_id = None
        self.access_cnf = {}        # the cnf claim of the access token being minted
        self.refresh_cnf = {}       # ... and of the refresh token
        self.authn_failures = []    # why idpyoidc refused the client authentication methods it tried
        self.federated = None       # the claims of the verified platform or service-account JWT


CURRENT = RequestContext()
CURRENT.reset()


class AuthnFailures(logging.Handler):
    """idpyoidc only logs why it refused a client authentication (then says "Authorization
    failed"): this keeps the reasons in CURRENT.authn_failures, for invalid_client's
    error_description."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Verifying auth using "):
            CURRENT.authn_failures.append(message.removeprefix("Verifying auth using "))
        elif message.startswith("Allowed methods for client"):
            CURRENT.authn_failures.append(" ".join(message.split()))


def capture_authn_failures() -> None:
    logger = logging.getLogger("idpyoidc.server.client_authn")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(AuthnFailures())


# -- DPoP proofs (RFC 9449 §4.3)


class DPoPError(Exception):
    """A proof that fails a check; str(error) says which."""


class DPoPProof:
    def __init__(self, jkt: str, claims: dict):
        self.jkt = jkt          # the JWK SHA-256 thumbprint (RFC 7638) of the proof's key
        self.claims = claims

    @property
    def nonce(self) -> str | None:
        return self.claims.get("nonce")


class ReplayCache:
    """The jti of every accepted proof, kept as long as its iat is acceptable."""

    def __init__(self):
        self.seen: dict[str, float] = {}

    def check_and_add(self, key: str, now: float) -> bool:
        horizon = DPOP_MAX_AGE + DPOP_MAX_FUTURE
        if len(self.seen) > 10000:
            self.seen = {k: t for k, t in self.seen.items() if now - t < horizon}
        if key in self.seen and now - self.seen[key] < horizon:
            return False
        self.seen[key] = now
        return True


def normalize_url(url: str) -> str:
    """An http(s) URL without query and fragment, its scheme and host lower-case and the
    scheme's default port dropped (RFC 9449 §4.3 item 9 with RFC 3986 §6.2.2 and §6.2.3)."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        raise DPoPError("htu has an invalid port")
    if ":" in host:
        host = f"[{host}]"
    if port and (scheme, port) not in (("https", 443), ("http", 80)):
        host = f"{host}:{port}"
    return urlunsplit((scheme, host, parts.path or "/", "", ""))


def verify_dpop_proof(proof: str, method: str, url: str, access_token: str | None = None) -> DPoPProof:
    """Checks a DPoP proof JWT for a request (everything of RFC 9449 §4.3 except the nonce and
    the jti replay, which need the server's state): three base64url parts; a header with typ
    "dpop+jwt", an allowed asymmetric alg and a public jwk (no private members); a valid
    signature by that jwk; jti; htm equal to method; htu equal to url (both normalized, query
    and fragment ignored); iat at most DPOP_MAX_AGE s old and DPOP_MAX_FUTURE s ahead; and,
    given an access token, ath = base64url(SHA-256(access token)). Raises DPoPError."""
    parts = proof.split(".")
    if len(parts) != 3 or not all(parts[:2]):
        raise DPoPError("not a compact JWS")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
    except (ValueError, UnicodeDecodeError):
        raise DPoPError("header or payload is not base64url JSON")
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise DPoPError("header or payload is not a JSON object")
    if header.get("typ") != "dpop+jwt":
        raise DPoPError("typ is not dpop+jwt")
    alg = header.get("alg")
    if alg not in DPOP_ALGS:
        raise DPoPError(f"alg {alg!r} is not one of {' '.join(DPOP_ALGS)}")
    jwk = header.get("jwk")
    if not isinstance(jwk, dict):
        raise DPoPError("no jwk in the header")
    if set(jwk) & {"d", "p", "q", "dp", "dq", "qi", "k", "oth"}:
        raise DPoPError("jwk holds private key material")
    try:
        key = key_from_jwk_dict(jwk)
        key.deserialize()
    except Exception as error:
        raise DPoPError(f"jwk is not a usable public key ({error})")
    key.kid = ""  # a kid in the jwk must not make cryptojwt look for another key
    try:
        JWS(alg=alg).verify_compact(proof, keys=[key], sigalg=alg)
    except Exception as error:
        raise DPoPError(f"signature does not verify ({type(error).__name__})")

    if not isinstance(claims.get("jti"), str) or not claims["jti"]:
        raise DPoPError("no jti")
    if claims.get("htm") != method:
        raise DPoPError(f"htm is not {method}")
    htu = claims.get("htu")
    if not isinstance(htu, str) or normalize_url(htu) != normalize_url(url):
        raise DPoPError(f"htu is not {normalize_url(url)}")
    iat = claims.get("iat")
    if not isinstance(iat, (int, float)) or isinstance(iat, bool):
        raise DPoPError("no numeric iat")
    now = time.time()
    if iat < now - DPOP_MAX_AGE or iat > now + DPOP_MAX_FUTURE:
        raise DPoPError(f"iat is more than {DPOP_MAX_AGE} s away from the server's clock")
    if access_token is not None:
        ath = b64url(hashlib.sha256(access_token.encode()).digest())
        if not isinstance(claims.get("ath"), str) or not hmac.compare_digest(claims["ath"], ath):
            raise DPoPError("ath is not the hash of the access token")
    return DPoPProof(key.thumbprint("SHA-256").decode(), claims)


# -- workload identity federation


def sign_es256(header: dict, claims: dict, key: ec.EllipticCurvePrivateKey) -> str:
    """A compact JWS of claims, signed ES256 (RFC 7518 §3.4: the signature is r || s)."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{signing_input}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


class AssertionRefused(Exception):
    """A platform or service-account JWT that fails a check; str(error) says which, without
    quoting the token."""


@dataclass
class TrustedIssuer:
    """An issuer whose ES256 JWTs the server trusts: iss, its public key and that key's kid."""
    name: str
    key: ec.EllipticCurvePublicKey
    kid: str
    service_account: bool = False  # iss = sub, exp at most an hour after iat, single-use jti


def _numeric(claims: dict, name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise AssertionRefused(f"{name} is not a number")
    return value


class Federation:
    """Verifies the JWTs of the trusted platform issuer and service account, for the three
    uses of workload identity federation: a client assertion (FederatedClientAssertion), a
    jwt-bearer grant's assertion (JWTBearerGrant) and a token exchange's subject token
    (PlatformTokenExchange). Checks, in order: a JWS with an ES256 header (kid, if any, the
    issuer's); iss a trusted issuer for the use; the signature; exp required and in the future;
    nbf and iat at most FEDERATION_LEEWAY s ahead; aud naming one of the audiences; sub; and
    for the service account sub = iss, exp - iat <= SERVICE_ACCOUNT_MAX_LIFETIME and a jti used
    once. A platform JWT's jti is not checked: the same projected token is used for minutes.
    `accepted` keeps the jti of every JWT accepted, per use, for the statistics."""

    USES = ("client_assertion", "jwt_bearer", "subject_token")

    def __init__(self, issuer: str, token_endpoints: list[str], platform: TrustedIssuer,
                 service_account: TrustedIssuer):
        self.issuer = issuer
        self.token_endpoints = list(token_endpoints)
        self.platform = platform
        self.service_account = service_account
        self.lock = threading.Lock()
        self.used_jtis: dict[str, float] = {}  # service-account jti -> its exp
        self.accepted = {use: collections.deque(maxlen=FEDERATION_KEPT) for use in self.USES}

    def clear(self) -> None:
        """Forgets the accepted jtis (the statistics), not the used ones."""
        for jtis in self.accepted.values():
            jtis.clear()

    def client_assertion(self, token: str, cinfo: dict) -> dict:
        """A platform JWT authenticating the client cinfo: iss, sub and aud the client's
        registered federated_issuer, federated_subject and federated_audience."""
        if cinfo.get("federated_issuer") != self.platform.name:
            raise AssertionRefused("the client trusts another issuer")
        return self.verify(token, "client_assertion", "the client assertion", [self.platform],
                           [cinfo["federated_audience"]], subject=cinfo["federated_subject"])

    def jwt_bearer(self, token: str) -> dict:
        """The assertion of a jwt-bearer grant: from the platform or the service account, aud
        the issuer or the token endpoint."""
        return self.verify(token, "jwt_bearer", "the assertion", [self.platform, self.service_account],
                           [self.issuer, *self.token_endpoints])

    def subject_token(self, token: str) -> dict:
        """A token exchange's subject token: from the platform, aud the issuer."""
        return self.verify(token, "subject_token", "the subject token", [self.platform], [self.issuer])

    def verify(self, token: str, use: str, what: str, issuers: list[TrustedIssuer], audiences: list[str],
               subject: str | None = None) -> dict:
        """The claims of token once checked (see the class); raises AssertionRefused."""
        parts = token.split(".") if isinstance(token, str) else []
        if len(parts) != 3 or not all(parts):
            raise AssertionRefused(f"{what} is not a signed JWT")
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except (ValueError, UnicodeDecodeError):
            raise AssertionRefused(f"{what}'s header or payload is not base64url JSON")
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise AssertionRefused(f"{what}'s header or payload is not a JSON object")
        trusted = {issuer.name: issuer for issuer in issuers}
        issuer = trusted.get(claims.get("iss"))
        if issuer is None:
            names = " or ".join(trusted)
            raise AssertionRefused(f"{what}'s iss {str(claims.get('iss'))[:200]!r} is not {names}")
        if header.get("alg") != "ES256":
            raise AssertionRefused(f"{what} is signed with alg {str(header.get('alg'))[:50]!r}, not ES256")
        if header.get("kid") not in (None, issuer.kid):
            raise AssertionRefused(f"{what}'s kid is not {issuer.kid}, the key of {issuer.name}")
        try:
            if len(signature) != 64:
                raise InvalidSignature()
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            issuer.key.verify(der, f"{parts[0]}.{parts[1]}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise AssertionRefused(f"{what}'s signature does not verify with the key of {issuer.name}")

        now = time.time()
        try:
            exp, nbf, iat = (_numeric(claims, name) for name in ("exp", "nbf", "iat"))
        except AssertionRefused as error:
            raise AssertionRefused(f"{what}'s {error}")
        if exp is None:
            raise AssertionRefused(f"{what} has no exp")
        if exp <= now:
            raise AssertionRefused(f"{what} has expired (exp {int(now - exp)} s ago)")
        for name, value in (("nbf", nbf), ("iat", iat)):
            if value is not None and value > now + FEDERATION_LEEWAY:
                raise AssertionRefused(f"{what} is not valid yet ({name} {int(value - now)} s ahead)")
        aud = claims.get("aud")
        aud = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not set(audiences) & {value for value in aud if isinstance(value, str)}:
            raise AssertionRefused(f"{what}'s aud does not name {' or '.join(audiences)}")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise AssertionRefused(f"{what} has no sub")
        if subject is not None and sub != subject:
            raise AssertionRefused(f"{what}'s sub {sub[:200]!r} is not the client's federated subject {subject!r}")
        jti = claims.get("jti")
        if issuer.service_account:
            if sub != issuer.name:
                raise AssertionRefused(f"{what}'s sub is not its iss")
            if exp - (iat if iat is not None else now) > SERVICE_ACCOUNT_MAX_LIFETIME:
                raise AssertionRefused(f"{what} lives longer than {SERVICE_ACCOUNT_MAX_LIFETIME} s (exp - iat)")
            if not isinstance(jti, str) or not jti:
                raise AssertionRefused(f"{what} has no jti")
            with self.lock:
                self.used_jtis = {seen: until for seen, until in self.used_jtis.items() if until > now}
                if jti in self.used_jtis:
                    raise AssertionRefused(f"{what}'s jti was used before")
                self.used_jtis[jti] = exp
        self.accepted[use].append(jti if isinstance(jti, str) else None)
        return claims


def federated_client(context, request) -> dict | None:
    """The registration of the request's client_id if it is a client that authenticates with
    a platform JWT (it has a federated_subject), else None."""
    client_id = request.get("client_id") if request is not None else None
    cinfo = context.cdb.get(client_id) if isinstance(client_id, str) else None
    return cinfo if cinfo and cinfo.get("federated_subject") else None


# -- the user


class AutoLogin(NoAuthn):
    """User authentication for the tests: the authorization endpoint signs `user` in without a
    page (idpyoidc's NoAuthn), and the password grant checks `passwords` (user -> password)."""

    def __init__(self, user: str, passwords: dict, upstream_get=None):
        super().__init__(user, upstream_get=upstream_get)
        self.passwords = passwords

    def verify(self, *args, username: str = "", password: str = "", **kwargs) -> str:
        expected = self.passwords.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise FailedAuthentication("wrong username or password")
        return username


# -- client authentication


def _check_assertion_claims(request, result: dict) -> dict:
    """What RFC 7523 §3 asks of a client assertion beyond what idpyoidc checks (signature, aud,
    exp when present, jti reuse when present)."""
    if request.get("client_assertion_type") != JWT_BEARER_ASSERTION:
        raise ClientAuthenticationError(f"client_assertion_type is not {JWT_BEARER_ASSERTION}")
    claims = result["jwt"]
    if claims.get("sub") != claims.get("iss"):
        raise ClientAuthenticationError("the assertion's sub is not its iss")
    if "exp" not in claims or "jti" not in claims:
        raise ClientAuthenticationError("the assertion lacks exp or jti")
    if request.get("client_id") not in (None, claims["iss"]):
        raise ClientAuthenticationError("client_id is not the assertion's iss")
    return result


class NotForFederatedClients:
    """Mixed into the other JWT assertion methods: a federated client's assertion is left to
    FederatedClientAssertion, so that its refusal says why without the others' failures."""

    def is_usable(self, request=None, authorization_token=None):
        return (super().is_usable(request=request, authorization_token=authorization_token)
                and federated_client(self.upstream_get("context"), request) is None)


class StrictPrivateKeyJWT(NotForFederatedClients, PrivateKeyJWT):
    def _verify(self, request=None, **kwargs):
        return _check_assertion_claims(request, super()._verify(request=request, **kwargs))


class StrictClientSecretJWT(NotForFederatedClients, ClientSecretJWT):
    def _verify(self, request=None, **kwargs):
        return _check_assertion_claims(request, super()._verify(request=request, **kwargs))


class FederatedClientAssertion(ClientAuthnMethod):
    """Client authentication with a platform JWT as client_assertion (RFC 7521 §4.2; what
    Entra's workload identity federation and Keycloak's federated client authentication do):
    the request names client_id, a client registered with federated_issuer, federated_subject
    and federated_audience, and the JWT passes Federation.client_assertion. No jti check."""

    tag = FEDERATED_METHOD

    def is_usable(self, request=None, authorization_token=None):
        return (request is not None and "client_assertion" in request
                and federated_client(self.upstream_get("context"), request) is not None)

    def _verify(self, request=None, **kwargs):
        if request.get("client_assertion_type") != JWT_BEARER_ASSERTION:
            raise ClientAuthenticationError(f"client_assertion_type is not {JWT_BEARER_ASSERTION}")
        context = self.upstream_get("context")
        cinfo = federated_client(context, request)
        try:
            context.federation.client_assertion(request["client_assertion"], cinfo)
        except AssertionRefused as error:
            raise ClientAuthenticationError(str(error))
        return {"client_id": cinfo["client_id"]}


class TlsClientAuth(ClientAuthnMethod):
    """tls_client_auth (RFC 8705 §2.1): the client presented, in the TLS handshake, a
    certificate that chains to the test CA and whose subject DN is the client's registered
    tls_client_auth_subject_dn (compared as RFC 4514 strings)."""

    tag = "tls_client_auth"

    def __init__(self, upstream_get, ca_cert: x509.Certificate | None = None):
        super().__init__(upstream_get)
        self.ca_cert = ca_cert

    def is_usable(self, request=None, authorization_token=None):
        # Only when nothing else authenticates the request: a secret or an assertion wins.
        return (CURRENT.peer_cert is not None and request is not None and "client_id" in request
                and "client_secret" not in request and "client_assertion" not in request
                and not authorization_token)

    def _verify(self, request=None, **kwargs):
        client_id = request["client_id"]
        cinfo = self.upstream_get("context").cdb.get(client_id) or {}
        cert = CURRENT.peer_cert
        self.check(cinfo, cert)
        return {"client_id": client_id}

    def check(self, cinfo: dict, cert: x509.Certificate) -> None:
        expected = cinfo.get("tls_client_auth_subject_dn")
        if not expected or cert.subject.rfc4514_string() != expected:
            raise ClientAuthenticationError("the certificate's subject DN is not the registered one")
        try:  # the TLS layer also trusts the registered self-signed certificates: not for this method
            cert.verify_directly_issued_by(self.ca_cert)
        except Exception:
            raise ClientAuthenticationError("the certificate is not issued by the test CA")


class SelfSignedTlsClientAuth(TlsClientAuth):
    """self_signed_tls_client_auth (RFC 8705 §2.2): the certificate presented is one of the
    x5c certificates in the client's registered jwks."""

    tag = "self_signed_tls_client_auth"

    def check(self, cinfo: dict, cert: x509.Certificate) -> None:
        der = cert.public_bytes(serialization.Encoding.DER)
        registered = [base64.b64decode(key["x5c"][0])
                      for key in (cinfo.get("jwks") or {}).get("keys", []) if key.get("x5c")]
        if der not in registered:
            raise ClientAuthenticationError("the certificate is not in the client's jwks")


# -- tokens


class BoundJWTToken(JWTToken):
    """idpyoidc's JWT access and refresh tokens, with the cnf claim of the current request:
    {"jkt": ...} for a DPoP proof (RFC 9449 §6.1), {"x5t#S256": ...} for a TLS client
    certificate (RFC 8705 §3.1), or none."""

    def load_custom_claims(self, payload: dict = None):
        payload.pop("cnf", None)  # idpyoidc's, from the grant's last DPoP key
        cnf = CURRENT.refresh_cnf if payload.get("token_class") == "refresh_token" else CURRENT.access_cnf
        if cnf:
            payload["cnf"] = dict(cnf)
        return payload


def token_binding(request, client_id, context, **kwargs):
    """A post_parse_request step of the token endpoint, after idpyoidc authenticated the
    client: refuses a DPoP client's request without a proof, checks that a code asked for
    with dpop_jkt (RFC 9449 §10) is redeemed with that key and that a public client refreshes
    with the key its refresh token is bound to (§5), and sets what the tokens will be bound to."""
    cinfo = context.cdb.get(client_id) or {}
    proof = CURRENT.dpop
    public = CURRENT.auth_method == "public"
    if cinfo.get("dpop_bound_access_tokens") and proof is None:
        return TokenErrorResponse(error="invalid_dpop_proof",
                                  error_description="this client must send a DPoP proof")
    if request.get("grant_type") == "authorization_code":
        session = context.session_manager.get_session_info_by_token(
            request["code"], grant=True, handler_key="authorization_code")
        bound_to = session["grant"].authorization_request.get("dpop_jkt")
        if bound_to and (proof is None or proof.jkt != bound_to):
            return TokenErrorResponse(
                error="invalid_dpop_proof",
                error_description="the authorization code is bound to another DPoP key (dpop_jkt)")
    if request.get("grant_type") == "refresh_token":
        handler = context.session_manager.token_handler["refresh_token"]
        bound_to = (handler.get_payload(request["refresh_token"]).get("cnf") or {}).get("jkt")
        if bound_to and (proof is None or proof.jkt != bound_to):
            return TokenErrorResponse(
                error="invalid_dpop_proof",
                error_description="the refresh token is bound to another DPoP key")
    if proof is not None:
        request["dpop_jkt"] = proof.jkt  # what idpyoidc's helpers read to answer token_type DPoP
        CURRENT.access_cnf["jkt"] = proof.jkt
        if public:  # confidential clients' refresh tokens are bound by their authentication
            CURRENT.refresh_cnf["jkt"] = proof.jkt
    if CURRENT.auth_method in TLS_METHODS:
        CURRENT.access_cnf["x5t#S256"] = cert_thumbprint(CURRENT.peer_cert)
    return request


def pkce_for_codes_only(check):
    """idpyoidc's PKCE check of token requests, for the authorization_code grant only (5.0.0
    runs it for every request type it does not know, and refuses a password grant for its
    missing code)."""
    def post_parse(request, client_id, context, **kwargs):
        if isinstance(request, Message) and request.get("grant_type") == "authorization_code":
            return check(request, client_id, context, **kwargs)
        return request
    return post_parse


def granted_scope(context, client_id: str, requested) -> list | TokenErrorResponse:
    """The scope to grant: the requested one (a space-separated string or a list) if within
    the client's allowed_scopes (else invalid_scope), or the client's default_scopes."""
    allowed = context.cdb[client_id].get("allowed_scopes", [])
    if isinstance(requested, str):
        requested = requested.split()
    if requested and not set(requested) <= set(allowed):
        return TokenErrorResponse(error="invalid_scope", error_description=f"allowed scopes: {' '.join(allowed)}")
    return list(requested or context.cdb[client_id].get("default_scopes", allowed))


def requested_targets(request, allowed: list[str]) -> list[str] | TokenErrorResponse:
    """The request's audience and resource values (RFC 8693 §2.1, RFC 8707), each one of
    allowed, else invalid_target."""
    targets = []
    for name in ("audience", "resource"):
        values = request.get(name) or []
        for target in [values] if isinstance(values, str) else values:
            if target not in allowed:
                return TokenErrorResponse(error="invalid_target",
                                          error_description=f"{name} must be one of {' '.join(allowed)}")
            targets.append(target)
    return targets


def issue_tokens(helper: TokenEndpointHelper, client_id: str, user_id: str, scope: list, acr: str, *,
                 refresh: bool, id_token: bool, token_args: dict | None = None) -> dict:
    """A session like the authorization endpoint's for user_id and client_id (so tokens carry
    sub, client_id and the user's claims) with scope, and the token response: an access token
    (token_type DPoP if the request's proof was verified; token_args for it, like resources),
    a refresh token if asked, and an ID token if asked and the scope has openid."""
    context = helper.endpoint.upstream_get("context")
    manager = context.session_manager
    authz_request = AuthorizationRequest(client_id=client_id, scope=scope, response_type="code")
    session_id = manager.create_session(
        authn_event=create_authn_event(user_id, authn_info=acr),
        auth_req=authz_request, user_id=user_id, client_id=client_id,
        token_usage_rules=context.authz.usage_rules(client_id))
    grant = context.authz(session_id, request=authz_request)
    manager.set(manager.decrypt_session_id(session_id), grant)

    token_type = "DPoP" if CURRENT.dpop is not None else "Bearer"
    access = helper._mint_token("access_token", grant, session_id, client_id, token_type=token_type,
                                token_args=token_args)
    response = {"access_token": access.value, "token_type": token_type, "scope": " ".join(grant.scope),
                "expires_in": access.expires_at - utc_time_sans_frac()}
    if refresh:
        response["refresh_token"] = helper._mint_token("refresh_token", grant, session_id, client_id).value
    if id_token and "openid" in grant.scope:
        response["id_token"] = helper._mint_token("id_token", grant, session_id, client_id).value
    return response


class SessionGrant(TokenEndpointHelper):
    """The base of the password, client_credentials and jwt-bearer grants: a session for the
    grant's user (issue_tokens), the requested scope within the client's allowed_scopes, an
    access token, a refresh token if issue_refresh, and an ID token when the scope has openid."""

    issue_refresh = True
    acr = "urn:oasis:names:tc:SAML:2.0:ac:classes:InternetProtocolPassword"

    def post_parse_request(self, request, client_id="", **kwargs):
        return request

    def user_id(self, request) -> str | TokenErrorResponse:
        raise NotImplementedError

    def requested_scope(self, request):
        return request.get("scope")

    def targets(self, request) -> list[str] | TokenErrorResponse:
        """The audiences of the access token beyond idpyoidc's (none here)."""
        return []

    def process_request(self, req, **kwargs):
        context = self.endpoint.upstream_get("context")
        client_id = req["client_id"]
        if not req.get("authenticated") and CURRENT.auth_method != "public":
            return self.error_cls(error="invalid_client")
        targets = self.targets(req)
        if isinstance(targets, TokenErrorResponse):
            return targets
        user_id = self.user_id(req)
        if isinstance(user_id, TokenErrorResponse):
            return user_id
        scope = granted_scope(context, client_id, self.requested_scope(req))
        if isinstance(scope, TokenErrorResponse):
            return scope
        return issue_tokens(self, client_id, user_id, scope, self.acr, refresh=self.issue_refresh, id_token=True,
                            token_args={"resources": targets} if targets else None)


class PasswordGrant(SessionGrant):
    """The resource owner password credentials grant (RFC 6749 §4.3), checked by AutoLogin."""

    def user_id(self, request):
        context = self.endpoint.upstream_get("context")
        try:
            return context.authn_broker.default()["method"].verify(
                username=request.get("username", ""), password=request.get("password", ""))
        except FailedAuthentication:
            return self.error_cls(error="invalid_grant", error_description="wrong username or password")


class ClientCredentialsGrant(SessionGrant):
    """The client credentials grant (RFC 6749 §4.4): the client is its own user (so sub is the
    client_id, as RFC 9068 §2.2 says), no refresh token."""

    issue_refresh = False
    acr = "urn:ietf:params:oauth:grant-type:client_credentials"

    def user_id(self, request):
        if CURRENT.auth_method == "public":
            return self.error_cls(error="unauthorized_client",
                                  error_description="a public client cannot use client_credentials")
        return request["client_id"]


class JWTBearerGrant(SessionGrant):
    """The JWT bearer grant (RFC 7523 §2.1): an assertion from the platform or the service
    account (Federation.jwt_bearer) for its sub; the scope from the request or else from the
    assertion's scope claim (as Google's service-account assertions carry it); audience and
    resource as at the token exchange (config federated_targets, else invalid_target); no
    refresh token. A refused assertion is invalid_grant (§3.1)."""

    issue_refresh = False
    acr = JWT_BEARER_GRANT

    def targets(self, request):
        return requested_targets(request, (self.config or {}).get("federated_targets", []))

    def user_id(self, request):
        assertion = request.get("assertion")
        if not isinstance(assertion, str) or not assertion:
            return self.error_cls(error="invalid_request", error_description="no assertion")
        try:
            CURRENT.federated = self.endpoint.upstream_get("context").federation.jwt_bearer(assertion)
        except AssertionRefused as error:
            return self.error_cls(error="invalid_grant", error_description=str(error))
        return CURRENT.federated["sub"]

    def requested_scope(self, request):
        scope = request.get("scope") or CURRENT.federated.get("scope")
        return scope if isinstance(scope, (str, list)) else None


class PlatformTokenExchange(TokenExchangeHelper):
    """idpyoidc's token exchange (RFC 8693) of its own access tokens, and the exchange of a
    platform JWT (subject_token_type jwt or id_token, as Google's STS and Keycloak's
    external-to-internal exchange take one): Federation.subject_token checks it (invalid_grant
    if it fails), audience and resource must be among the config's federated_targets
    (invalid_target), scope within the client's (invalid_scope), requested_token_type an access
    token. The answer: an access token for the JWT's sub, no refresh token."""

    def post_parse_request(self, request, client_id="", **kwargs):
        if request.get("subject_token_type") not in FEDERATED_TOKEN_TYPES:
            return super().post_parse_request(request, client_id, **kwargs)
        request = TokenExchangeRequest(**request.to_dict())
        try:
            request.verify()
        except (ValueError, MissingRequiredAttribute, MissingRequiredValue) as error:
            return self.error_cls(error="invalid_request", error_description=f"{type(error).__name__}: {error}")
        if request.get("requested_token_type", ACCESS_TOKEN_TYPE) != ACCESS_TOKEN_TYPE:
            return self.error_cls(error="invalid_request",
                                  error_description=f"a platform token is exchanged for an {ACCESS_TOKEN_TYPE} only")
        targets = requested_targets(request, self.config.get("federated_targets", []))
        if isinstance(targets, TokenErrorResponse):
            return targets
        context = self.endpoint.upstream_get("context")
        scope = granted_scope(context, request["client_id"], request.get("scope"))
        if isinstance(scope, TokenErrorResponse):
            return scope
        try:
            CURRENT.federated = context.federation.subject_token(request["subject_token"])
        except AssertionRefused as error:
            return self.error_cls(error="invalid_grant", error_description=str(error))
        return request

    def process_request(self, request, **kwargs):
        if request.get("subject_token_type") not in FEDERATED_TOKEN_TYPES:
            return super().process_request(request, **kwargs)
        context = self.endpoint.upstream_get("context")
        client_id = request["client_id"]
        scope = granted_scope(context, client_id, request.get("scope"))
        targets = requested_targets(request, self.config.get("federated_targets", []))
        response = issue_tokens(self, client_id, CURRENT.federated["sub"], scope, TOKEN_EXCHANGE, refresh=False,
                                id_token=False, token_args={"resources": targets} if targets else None)
        return {**response, "issued_token_type": ACCESS_TOKEN_TYPE}


class RefreshGrant(RefreshTokenHelper):
    """idpyoidc's refresh_token grant, answering invalid_grant (RFC 6749 §5.2) for a used
    (rotated), revoked or expired refresh token where 5.0.0 answers invalid_request."""

    def post_parse_request(self, request, client_id="", **kwargs):
        result = super().post_parse_request(request, client_id, **kwargs)
        if isinstance(result, TokenErrorResponse) and result.get("error_description") == "Refresh token inactive":
            result["error"] = "invalid_grant"
        return result


class ExtraAudiences:
    """An endpoint whose JWT client assertions may also name extra_audiences in aud (the
    mutual-TLS aliases of RFC 8705 §5): idpyoidc only knows its endpoints and its issuer."""

    extra_audiences = ()

    def allowed_target_uris(self):
        return super().allowed_target_uris() | set(self.extra_audiences)


class TokenEndpoint(ExtraAudiences, Token):
    """idpyoidc's OpenID Connect token endpoint with the grants above, remembering how the
    client authenticated."""

    helper_by_grant_type = {
        "authorization_code": AccessTokenHelper,
        "refresh_token": RefreshGrant,
        "password": PasswordGrant,
        "client_credentials": ClientCredentialsGrant,
        TOKEN_EXCHANGE: PlatformTokenExchange,
        JWT_BEARER_GRANT: JWTBearerGrant,
    }
    _supports = {**Token._supports, "grant_types_supported": list(helper_by_grant_type)}

    def client_authentication(self, request, http_info=None, **kwargs):
        info = super().client_authentication(request, http_info, **kwargs)
        CURRENT.auth_method, CURRENT.client_id = info.get("method"), info.get("client_id")
        return info

    def _get_helper(self, request, client_id=""):
        # RFC 6749 §5.2's errors where idpyoidc answers invalid_request "Unsupported grant_type".
        helper = super()._get_helper(request, client_id)
        if isinstance(helper, TokenErrorResponse) and \
                str(helper.get("error_description", "")).startswith("Unsupported grant_type"):
            known = request.get("grant_type") in self.grant_type_helper
            helper["error"] = "unauthorized_client" if known else "unsupported_grant_type"
        return helper


def allow_loopback_redirect(context, client_id: str, redirect_uri) -> None:
    """RFC 8252 §7.3: a registered http://127.0.0.1/PATH matches http://127.0.0.1:PORT/PATH on
    any port. idpyoidc compares redirect URIs exactly, so the port's URI is registered for the
    client when it is first asked for."""
    cinfo = context.cdb.get(client_id)
    if not cinfo or not isinstance(redirect_uri, str):
        return
    parts = urlsplit(redirect_uri)
    try:
        port = parts.port
    except ValueError:
        return
    if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "::1") or not port:
        return
    host = "[::1]" if parts.hostname == "::1" else parts.hostname
    portless = urlunsplit(("http", host, parts.path, parts.query, ""))
    registered = [uri if isinstance(uri, str) else uri[0] for uri in cinfo.get("redirect_uris", [])]
    if portless in registered and redirect_uri not in registered:
        cinfo["redirect_uris"].append((redirect_uri, {}))


class LoopbackRedirects:
    """Mixed into the authorization and PAR endpoints: see allow_loopback_redirect."""

    def _post_parse_request(self, request, client_id, context, **kwargs):
        allow_loopback_redirect(context, client_id, request.get("redirect_uri"))
        return super()._post_parse_request(request, client_id, context, **kwargs)


class AuthorizationEndpoint(LoopbackRedirects, OIDCAuthorization):
    pass


class PushedAuthorizationEndpoint(ExtraAudiences, LoopbackRedirects, PushedAuthorization):
    """idpyoidc's PAR endpoint (RFC 9126), remembering how the client authenticated. It
    inherits the OAuth 2.0 authorization endpoint's checks, not the OpenID Connect one's."""

    def client_authentication(self, request, http_info=None, **kwargs):
        info = super().client_authentication(request, http_info, **kwargs)
        CURRENT.auth_method, CURRENT.client_id = info.get("method"), info.get("client_id")
        return info
