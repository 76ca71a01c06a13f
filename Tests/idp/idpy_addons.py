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

Everything request-specific (the TLS client certificate, the verified DPoP proof, the client
authentication method used) travels in CURRENT, a thread-local the HTTP layer fills; the
HTTP layer runs one request at a time through idpyoidc (which is not thread-safe).
"""

import base64
import hashlib
import hmac
import json
import logging
import threading
import time
from urllib.parse import urlsplit, urlunsplit

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptojwt.jwk.jwk import key_from_jwk_dict
from cryptojwt.jws.jws import JWS

from idpyoidc.message import Message
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
JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
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


class StrictPrivateKeyJWT(PrivateKeyJWT):
    def _verify(self, request=None, **kwargs):
        return _check_assertion_claims(request, super()._verify(request=request, **kwargs))


class StrictClientSecretJWT(ClientSecretJWT):
    def _verify(self, request=None, **kwargs):
        return _check_assertion_claims(request, super()._verify(request=request, **kwargs))


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


class SessionGrant(TokenEndpointHelper):
    """The base of the password and client_credentials grants: a session like the
    authorization endpoint's (so tokens carry sub, client_id and the user's claims), the
    requested scope within the client's allowed_scopes, an access token, a refresh token
    unless the grant is client_credentials, and an ID token when the scope has openid."""

    issue_refresh = True
    acr = "urn:oasis:names:tc:SAML:2.0:ac:classes:InternetProtocolPassword"

    def post_parse_request(self, request, client_id="", **kwargs):
        return request

    def user_id(self, request) -> str | TokenErrorResponse:
        raise NotImplementedError

    def process_request(self, req, **kwargs):
        context = self.endpoint.upstream_get("context")
        client_id = req["client_id"]
        if not req.get("authenticated") and CURRENT.auth_method != "public":
            return self.error_cls(error="invalid_client")
        user_id = self.user_id(req)
        if isinstance(user_id, TokenErrorResponse):
            return user_id
        allowed = context.cdb[client_id].get("allowed_scopes", [])
        requested = req.get("scope")
        if isinstance(requested, str):
            requested = requested.split()
        if requested and not set(requested) <= set(allowed):
            return self.error_cls(error="invalid_scope",
                                  error_description=f"allowed scopes: {' '.join(allowed)}")
        scope = requested or context.cdb[client_id].get("default_scopes", allowed)

        manager = context.session_manager
        authz_request = AuthorizationRequest(client_id=client_id, scope=scope, response_type="code")
        session_id = manager.create_session(
            authn_event=create_authn_event(user_id, authn_info=self.acr),
            auth_req=authz_request, user_id=user_id, client_id=client_id,
            token_usage_rules=context.authz.usage_rules(client_id))
        grant = context.authz(session_id, request=authz_request)
        manager.set(manager.decrypt_session_id(session_id), grant)

        token_type = "DPoP" if req.get("dpop_jkt") else "Bearer"
        access = self._mint_token("access_token", grant, session_id, client_id, token_type=token_type)
        response = {"access_token": access.value, "token_type": token_type, "scope": " ".join(grant.scope),
                    "expires_in": access.expires_at - utc_time_sans_frac()}
        if self.issue_refresh:
            response["refresh_token"] = self._mint_token("refresh_token", grant, session_id, client_id).value
        if "openid" in grant.scope:
            response["id_token"] = self._mint_token("id_token", grant, session_id, client_id).value
        return response


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
        TOKEN_EXCHANGE: TokenExchangeHelper,
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
