"""Proves that idpy_server.py does what its docstring says, as a client would see it: starts it
(without and with --mtls) and runs every feature against it over HTTPS, building DPoP proofs,
client assertions and PKCE by hand (cryptography only, not the server's JOSE library).

    .venv/bin/python Tests/idp/idpy_selftest.py [-v] [-k SUBSTRING]

Prints one line per check and exits 1 if any failed. The servers' stderr goes to a file in the
temporary directory, shown when a check fails (or always with -v).
"""

import argparse
import base64
import datetime
import hashlib
import hmac
import http.client
import json
import os
import secrets
import signal
import ssl
import stat
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

HERE = Path(__file__).resolve().parent
SERVER = HERE / "idpy_server.py"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
PLATFORM_SUBJECT = "system:serviceaccount:apps:billing"


# -- JOSE by hand


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_json(document: dict) -> dict:
    return json.loads(base64.urlsafe_b64decode(document + "=" * (-len(document) % 4)))


def public_jwk(key) -> dict:
    if isinstance(key, ec.EllipticCurvePrivateKey):
        numbers = key.public_key().public_numbers()
        return {"kty": "EC", "crv": "P-256", "x": b64url(numbers.x.to_bytes(32, "big")),
                "y": b64url(numbers.y.to_bytes(32, "big"))}
    numbers = key.public_key().public_numbers()
    return {"kty": "RSA", "n": b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
            "e": b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big"))}


def thumbprint(jwk: dict) -> str:
    """RFC 7638: SHA-256 of the required members, sorted, without whitespace."""
    members = ("crv", "kty", "x", "y") if jwk["kty"] == "EC" else ("e", "kty", "n")
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode()).digest())


def sign(header: dict, claims: dict, key) -> str:
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}".encode()
    alg = header["alg"]
    if alg == "none":
        signature = b""
    elif alg == "HS256":
        signature = hmac.new(key, signing_input, hashlib.sha256).digest()
    elif alg == "ES256":
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    elif alg == "RS256":
        signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    elif alg == "PS256":
        signature = key.sign(signing_input, padding.PSS(padding.MGF1(hashes.SHA256()), 32), hashes.SHA256())
    else:
        raise ValueError(alg)
    return f"{signing_input.decode()}.{b64url(signature)}"


def dpop_proof(key, method: str, url: str, *, nonce=None, access_token=None, iat=None, jti=None,
               typ="dpop+jwt", alg=None, jwk=None, extra_header=None) -> str:
    alg = alg or ("ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "PS256")
    header = {"typ": typ, "alg": alg, "jwk": jwk or public_jwk(key), **(extra_header or {})}
    claims = {"jti": jti or str(uuid.uuid4()), "htm": method, "htu": url, "iat": int(iat or time.time())}
    if nonce:
        claims["nonce"] = nonce
    if access_token:
        claims["ath"] = b64url(hashlib.sha256(access_token.encode()).digest())
    return sign(header, claims, key)


def assertion(client_id: str, key, aud, *, alg="ES256", kid=None, **overrides) -> str:
    now = int(time.time())
    claims = {"iss": client_id, "sub": client_id, "aud": aud, "jti": str(uuid.uuid4()),
              "iat": now, "exp": now + 60}
    claims.update(overrides)
    claims = {k: v for k, v in claims.items() if v is not None}
    header = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid else {})}
    return sign(header, claims, key)


def verify_es256(token: str, jwks: dict) -> tuple[dict, dict]:
    """(header, claims) of an ES256 JWT whose signature verifies with the JWKS key of its kid."""
    head, payload, signature = token.split(".")
    header = b64url_json(head)
    jwk = next(k for k in jwks["keys"] if k.get("kid") == header.get("kid"))
    numbers = ec.EllipticCurvePublicNumbers(int.from_bytes(base64.urlsafe_b64decode(jwk["x"] + "=="), "big"),
                                            int.from_bytes(base64.urlsafe_b64decode(jwk["y"] + "=="), "big"),
                                            ec.SECP256R1())
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    numbers.public_key().verify(der, f"{head}.{payload}".encode(), ec.ECDSA(hashes.SHA256()))
    return header, jwt_claims(token)


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, b64url(hashlib.sha256(verifier.encode()).digest())


def jwt_claims(token: str) -> dict:
    return b64url_json(token.split(".")[1])


def verify_id_token(id_token: str, jwks: dict, issuer: str, client_id: str) -> dict:
    header, claims = b64url_json(id_token.split(".")[0]), jwt_claims(id_token)
    key = next(k for k in jwks["keys"] if k.get("kid") == header.get("kid"))
    head, payload, signature = id_token.split(".")
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    if header["alg"] == "RS256":
        n = int.from_bytes(base64.urlsafe_b64decode(key["n"] + "=="), "big")
        e = int.from_bytes(base64.urlsafe_b64decode(key["e"] + "=="), "big")
        rsa.RSAPublicNumbers(e, n).public_key().verify(raw, f"{head}.{payload}".encode(), padding.PKCS1v15(),
                                                       hashes.SHA256())
    else:
        raise AssertionError(f"unexpected id_token alg {header['alg']}")
    check(claims["iss"] == issuer and client_id in (claims["aud"] if isinstance(claims["aud"], list)
                                                    else [claims["aud"]]), f"id_token claims {claims}")
    return claims


# -- the server under test


class IdpyServer:
    def __init__(self, workdir: Path, *args: str):
        self.workdir = workdir
        self.log = open(workdir.with_suffix(".log"), "wb")
        started = time.monotonic()
        self.process = subprocess.Popen([sys.executable, str(SERVER), "--workdir", str(workdir), *args],
                                        stdout=subprocess.PIPE, stderr=self.log)
        line = self.process.stdout.readline()
        self.startup = time.monotonic() - started
        if not line:
            raise RuntimeError(f"idpy_server.py exited ({self.process.wait()}): see {self.log.name}")
        self.info = json.loads(line)
        self.issuer = self.info["issuer"]
        self.ca = self.info["ca_file"]
        self.http = requests.Session()
        self.http.verify = self.ca
        self.http.trust_env = False  # else REQUESTS_CA_BUNDLE (and proxies) would win over verify
        self.discovery = self.http.get(self.info["endpoints"]["discovery"]).json()
        self.jwks = self.http.get(self.discovery["jwks_uri"]).json()

    def url(self, path: str) -> str:
        return f"{self.issuer}{path}"

    def client(self, client_id: str) -> dict:
        return self.info["clients"][client_id]

    def secret(self, client_id: str) -> str:
        return Path(self.client(client_id)["secret_file"]).read_text()

    def key(self, client_id: str):
        return serialization.load_pem_private_key(Path(self.client(client_id)["key_file"]).read_bytes(), None)

    def token(self, data: dict, *, proof=None, auth=None, cert=None, path="/token") -> requests.Response:
        headers = {"DPoP": proof} if proof else {}
        return self.http.post(self.url(path), data=data, headers=headers, auth=auth, cert=cert)

    def mode(self, mode: str) -> dict:
        answer = self.http.post(self.url("/test/mode"), json={"mode": mode})
        check(answer.status_code == 200, f"setting mode {mode}: {answer.status_code} {answer.text}")
        return answer.json()

    def stats(self) -> dict:
        return self.http.get(self.url("/test/stats")).json()

    def platform_file_token(self) -> str:
        return Path(self.info["platform"]["token_file"]).read_text()

    def platform_token(self, **claims) -> str:
        """A token signed by the platform key, from /test/platform-token."""
        return expect(self.http.post(self.info["endpoints"]["platform_token"], json=claims), 200)["token"]

    def resource(self, token: str, *, scheme="DPoP", proof=None, cert=None) -> requests.Response:
        headers = {"Authorization": f"{scheme} {token}", **({"DPoP": proof} if proof else {})}
        return self.http.get(self.url("/resource"), headers=headers, cert=cert)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.log.close()
        return code


# -- checks


class CheckFailed(Exception):
    pass


def check(condition, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def expect(response: requests.Response, status: int, error: str | None = None) -> dict:
    try:
        body = response.json()
    except ValueError:
        body = {}
    check(response.status_code == status and (error is None or body.get("error") == error),
          f"{response.request.method} {urlsplit(response.url).path}: wanted {status} {error or ''}, "
          f"got {response.status_code} {response.text[:300]}")
    return body


def password_grant(server: IdpyServer, client_id: str, key=None, scope="openid read write", **extra) -> dict:
    data = {"grant_type": "password", "username": "alice", "password": "alice-password-1",
            "client_id": client_id, "scope": scope, **extra}
    proof = dpop_proof(key, "POST", server.url("/token")) if key else None
    return expect(server.token(data, proof=proof), 200)


def pkjwt(server: IdpyServer, client_id: str, aud=None, alg="ES256", **overrides) -> dict:
    key = server.key(client_id)
    return {"client_id": client_id, "client_assertion_type": JWT_BEARER,
            "client_assertion": assertion(client_id, key, aud or server.url("/token"), alg=alg,
                                          kid=server.client(client_id)["key_id"], **overrides)}


def t_discovery(s: IdpyServer) -> None:
    d = s.discovery
    check(d["issuer"] == s.issuer == f"https://127.0.0.1:{s.info['port']}", f"issuer {d['issuer']}")
    for name, path in [("token_endpoint", "/token"), ("authorization_endpoint", "/authorization"),
                       ("pushed_authorization_request_endpoint", "/par"), ("jwks_uri", "/jwks"),
                       ("userinfo_endpoint", "/userinfo")]:
        check(d[name] == s.url(path), f"{name} {d.get(name)}")
    check("ES256" in d["dpop_signing_alg_values_supported"], "dpop algs")
    check({"private_key_jwt", "client_secret_jwt", "client_secret_basic"} <= set(d["token_endpoint_auth_methods_supported"]),
          "auth methods")
    check({"password", "client_credentials", "authorization_code", "refresh_token", TOKEN_EXCHANGE, JWT_BEARER_GRANT}
          <= set(d["grant_types_supported"]), "grant types")
    check(d["code_challenge_methods_supported"] == ["S256"], "pkce")
    check(any(k["kty"] == "RSA" for k in s.jwks["keys"]) and all("d" not in k for k in s.jwks["keys"]), "jwks")
    check("mtls_endpoint_aliases" not in d and "tls_client_auth" not in d["token_endpoint_auth_methods_supported"],
          "no mTLS without --mtls")
    check(s.http.get(s.url("/.well-known/oauth-authorization-server")).json()["issuer"] == s.issuer, "RFC 8414 path")


def t_files(s: IdpyServer) -> None:
    for client_id, info in s.info["clients"].items():
        for name in ("secret_file", "key_file"):
            if info[name]:
                mode = stat.S_IMODE(os.stat(info[name]).st_mode)
                check(mode == 0o600, f"{info[name]} has mode {mode:o}")
    check(stat.S_IMODE(os.stat(s.info["client_key_file"]).st_mode) == 0o600, "client key mode")
    check(s.info["users"] == {"alice": "alice-password-1"}, "users")
    check(set(s.info["clients"]) == {"authgate-dpop", "authgate-pkjwt-ec", "authgate-pkjwt-rsa", "authgate-secretjwt",
                                     "authgate-exchange", "authgate-par", "authgate-federated", "authgate-workload"},
          f"clients {set(s.info['clients'])}")
    for path in (s.workdir / "platform-key.pem", s.info["service_account"]["key_file"]):
        check(stat.S_IMODE(os.stat(path).st_mode) == 0o600, f"{path} mode")
    check(stat.S_IMODE(os.stat(s.info["platform"]["token_file"]).st_mode) == 0o644, "platform token mode")


def t_dpop_token(s: IdpyServer) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    body = password_grant(s, "authgate-dpop", key)
    check(body["token_type"] == "DPoP", f"token_type {body['token_type']}")
    check(jwt_claims(body["access_token"])["cnf"] == {"jkt": thumbprint(public_jwk(key))}, "cnf.jkt")
    check("refresh_token" in body and "id_token" in body, "refresh and ID tokens")
    claims = verify_id_token(body["id_token"], s.jwks, s.issuer, "authgate-dpop")
    check(claims["sub"] == "alice", f"sub {claims['sub']}")
    # An RSA proof key (PS256) works too.
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    body = password_grant(s, "authgate-dpop", rsa_key)
    check(jwt_claims(body["access_token"])["cnf"]["jkt"] == thumbprint(public_jwk(rsa_key)), "RSA jkt")
    stats = s.stats()
    check(stats["client_auth"]["authgate-dpop"] == "none" and stats["last_token_request"]["dpop_jkt"]
          == thumbprint(public_jwk(rsa_key)), f"stats {stats}")


def t_dpop_required(s: IdpyServer) -> None:
    data = {"grant_type": "password", "username": "alice", "password": "alice-password-1", "client_id": "authgate-dpop"}
    expect(s.token(data), 400, "invalid_dpop_proof")


def t_dpop_bad_proofs(s: IdpyServer) -> None:
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    url = s.url("/token")
    data = {"grant_type": "password", "username": "alice", "password": "alice-password-1", "client_id": "authgate-dpop"}
    private_jwk = {**public_jwk(key), "d": b64url(key.private_numbers().private_value.to_bytes(32, "big"))}
    bad = {
        "htu of another endpoint": dpop_proof(key, "POST", s.url("/par")),
        "htu of another origin": dpop_proof(key, "POST", "https://localhost:1/token"),
        "htm GET": dpop_proof(key, "GET", url),
        "stale iat": dpop_proof(key, "POST", url, iat=time.time() - 300),
        "future iat": dpop_proof(key, "POST", url, iat=time.time() + 300),
        "typ JWT": dpop_proof(key, "POST", url, typ="JWT"),
        "jwk of another key": dpop_proof(key, "POST", url, jwk=public_jwk(other)),
        "alg none": dpop_proof(key, "POST", url, alg="none"),
        "alg HS256": sign({"typ": "dpop+jwt", "alg": "HS256", "jwk": public_jwk(key)},
                          {"jti": "x", "htm": "POST", "htu": url, "iat": int(time.time())}, b"k" * 32),
        "private jwk": dpop_proof(key, "POST", url, jwk=private_jwk),
        "not a JWT": "not-a-jwt",
    }
    for name, proof in bad.items():
        body = expect(s.token(data, proof=proof), 400, "invalid_dpop_proof")
        check(body.get("error_description"), f"{name}: no error_description")
    # Two DPoP headers (requests cannot send them).
    connection = http.client.HTTPSConnection("127.0.0.1", s.info["port"],
                                             context=ssl.create_default_context(cafile=s.ca))
    connection.putrequest("POST", "/token")
    body = urlencode(data).encode()
    for name, value in [("Content-Type", "application/x-www-form-urlencoded"), ("Content-Length", str(len(body))),
                        ("DPoP", dpop_proof(key, "POST", url)), ("DPoP", dpop_proof(key, "POST", url))]:
        connection.putheader(name, value)
    connection.endheaders(body)
    response = connection.getresponse()
    check(response.status == 400 and json.loads(response.read())["error"] == "invalid_dpop_proof", "two DPoP headers")
    connection.close()
    # A query and a default-port-free form of the same URL are the same htu; a replayed jti is not.
    proof = dpop_proof(key, "POST", url + "?x=1")
    expect(s.token(data, proof=proof), 200)
    expect(s.token(data, proof=proof), 400, "invalid_dpop_proof")
    expect(s.token(data, proof=dpop_proof(key, "POST", url.replace("https://", "HTTPS://"))), 200)


def t_dpop_nonce(s: IdpyServer) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    url = s.url("/token")
    data = {"grant_type": "password", "username": "alice", "password": "alice-password-1", "client_id": "authgate-dpop"}
    before = s.stats()["nonce_challenges"]
    nonce = s.mode("require-nonce")["nonce"]
    try:
        first = s.token(data, proof=dpop_proof(key, "POST", url))
        expect(first, 400, "use_dpop_nonce")
        check(first.headers.get("DPoP-Nonce") == nonce, f"DPoP-Nonce {first.headers.get('DPoP-Nonce')}")
        expect(s.token(data, proof=dpop_proof(key, "POST", url, nonce="wrong")), 400, "use_dpop_nonce")
        body = expect(s.token(data, proof=dpop_proof(key, "POST", url, nonce=first.headers["DPoP-Nonce"])), 200)
        check(body["token_type"] == "DPoP", "token_type after the nonce")
        expect(s.token(data, proof=dpop_proof(key, "POST", url, nonce=nonce)), 200)  # still the same nonce
        # Clients without DPoP are not concerned.
        expect(s.token({"grant_type": "client_credentials"}, auth=("authgate-exchange", s.secret("authgate-exchange"))), 200)

        s.mode("nonce-always")
        first = s.token(data, proof=dpop_proof(key, "POST", url))
        expect(first, 400, "use_dpop_nonce")
        second = s.token(data, proof=dpop_proof(key, "POST", url, nonce=first.headers["DPoP-Nonce"]))
        expect(second, 400, "use_dpop_nonce")
        check(second.headers["DPoP-Nonce"] != first.headers["DPoP-Nonce"], "nonce-always repeats a nonce")

        s.mode("refuse-dpop")
        expect(s.token(data, proof=dpop_proof(key, "POST", url)), 400, "invalid_dpop_proof")
        expect(s.token({"grant_type": "client_credentials"}, auth=("authgate-exchange", s.secret("authgate-exchange"))), 200)
    finally:
        s.mode("normal")
    check(s.stats()["nonce_challenges"] - before == 4, f"nonce_challenges {s.stats()['nonce_challenges'] - before}")


def t_resource(s: IdpyServer) -> None:
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    token = password_grant(s, "authgate-dpop", key, scope="read")["access_token"]
    url = s.url("/resource")
    good = expect(s.resource(token, proof=dpop_proof(key, "GET", url, access_token=token)), 200)
    check(good["sub"] == "alice" and good["client_id"] == "authgate-dpop" and good["token_type"] == "DPoP",
          f"resource answer {good}")

    def refused(response, error):
        expect(response, 401, error)
        challenge = response.headers.get("WWW-Authenticate", "")
        check(challenge.startswith("DPoP ") and f'error="{error}"' in challenge, f"WWW-Authenticate {challenge!r}")

    refused(s.resource(token, scheme="Bearer"), "invalid_token")
    refused(s.resource(token, scheme="Bearer", proof=dpop_proof(key, "GET", url, access_token=token)), "invalid_token")
    refused(s.resource(token), "invalid_dpop_proof")
    refused(s.resource(token, proof=dpop_proof(key, "GET", s.url("/userinfo"), access_token=token)), "invalid_dpop_proof")
    refused(s.resource(token, proof=dpop_proof(key, "POST", url, access_token=token)), "invalid_dpop_proof")
    refused(s.resource(token, proof=dpop_proof(key, "GET", url, access_token=token + "x")), "invalid_dpop_proof")
    refused(s.resource(token, proof=dpop_proof(key, "GET", url)), "invalid_dpop_proof")  # no ath
    refused(s.resource(token, proof=dpop_proof(other, "GET", url, access_token=token)), "invalid_dpop_proof")
    proof = dpop_proof(key, "GET", url, access_token=token)
    expect(s.resource(token, proof=proof), 200)
    refused(s.resource(token, proof=proof), "invalid_dpop_proof")  # replayed
    refused(s.resource(token[:-4] + "AAAA", proof=dpop_proof(key, "GET", url, access_token=token[:-4] + "AAAA")),
            "invalid_token")

    # A token that is not DPoP-bound: Bearer only.
    bearer = expect(s.token({"grant_type": "client_credentials"},
                            auth=("authgate-exchange", s.secret("authgate-exchange"))), 200)["access_token"]
    plain = expect(s.resource(bearer, scheme="Bearer"), 200)
    check(plain["client_id"] == "authgate-exchange" and plain["sub"] == "authgate-exchange"
          and plain["token_type"] == "Bearer", f"bearer answer {plain}")
    refused(s.resource(bearer, proof=dpop_proof(key, "GET", url, access_token=bearer)), "invalid_token")
    response = s.http.get(url)
    check(response.status_code == 401 and "DPoP" in response.headers.get("WWW-Authenticate", ""), "no token")
    expect(s.resource("garbage", scheme="Bearer"), 401, "invalid_token")

    nonce = s.mode("resource-nonce")["nonce"]
    try:
        response = s.resource(token, proof=dpop_proof(key, "GET", url, access_token=token))
        refused(response, "use_dpop_nonce")
        check(response.headers.get("DPoP-Nonce") == nonce, "resource DPoP-Nonce")
        expect(s.resource(token, proof=dpop_proof(key, "GET", url, access_token=token, nonce=nonce)), 200)
        expect(s.token({"grant_type": "password", "username": "alice", "password": "alice-password-1",
                        "client_id": "authgate-dpop"}, proof=dpop_proof(key, "POST", s.url("/token"))), 200)
    finally:
        s.mode("normal")


def t_userinfo(s: IdpyServer) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    token = password_grant(s, "authgate-dpop", key, scope="openid profile email")["access_token"]
    url = s.url("/userinfo")
    info = expect(s.http.get(url, headers={"Authorization": f"DPoP {token}",
                                           "DPoP": dpop_proof(key, "GET", url, access_token=token)}), 200)
    check(info["sub"] == "alice" and info.get("email") == "alice@example.com", f"userinfo {info}")
    expect(s.http.get(url, headers={"Authorization": f"Bearer {token}"}), 401, "invalid_token")
    bearer = password_grant(s, "authgate-exchange", scope="openid email",
                            client_secret=s.secret("authgate-exchange"))["access_token"]
    info = expect(s.http.get(url, headers={"Authorization": f"Bearer {bearer}"}), 200)
    check(info["sub"] == "alice", f"userinfo {info}")


def t_dpop_refresh(s: IdpyServer) -> None:
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    first = password_grant(s, "authgate-dpop", key)
    check(jwt_claims(first["refresh_token"])["cnf"]["jkt"] == thumbprint(public_jwk(key)), "refresh token cnf")
    url = s.url("/token")
    data = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"], "client_id": "authgate-dpop"}
    expect(s.token(data), 400, "invalid_dpop_proof")
    expect(s.token(data, proof=dpop_proof(other, "POST", url)), 400, "invalid_dpop_proof")
    second = expect(s.token(data, proof=dpop_proof(key, "POST", url)), 200)
    check(second["token_type"] == "DPoP" and second["refresh_token"] != first["refresh_token"], f"refresh {second}")
    check(jwt_claims(second["access_token"])["cnf"]["jkt"] == thumbprint(public_jwk(key)), "refreshed cnf")
    expect(s.token(data, proof=dpop_proof(key, "POST", url)), 400, "invalid_grant")  # rotated
    data["refresh_token"] = second["refresh_token"]
    third = expect(s.token({**data, "scope": "read"}, proof=dpop_proof(key, "POST", url)), 200)
    check(third["scope"] == "read", f"narrowed scope {third['scope']}")


def t_private_key_jwt(s: IdpyServer) -> None:
    token_url = s.url("/token")
    cc = {"grant_type": "client_credentials", "scope": "read"}
    for client_id, alg in [("authgate-pkjwt-ec", "ES256"), ("authgate-pkjwt-rsa", "RS256"), ("authgate-pkjwt-rsa", "PS256")]:
        body = expect(s.token({**cc, **pkjwt(s, client_id, alg=alg)}), 200)
        check(body["token_type"] == "Bearer" and "refresh_token" not in body, f"{client_id} {body}")
        check(jwt_claims(body["access_token"])["client_id"] == client_id, "client_id claim")
        check(s.stats()["client_auth"][client_id] == "private_key_jwt", "stats client_auth")
        # aud: the issuer works as well as the token endpoint URL.
        expect(s.token({**cc, **pkjwt(s, client_id, alg=alg, aud=s.issuer)}), 200)
        expect(s.token({**cc, **pkjwt(s, client_id, alg=alg, aud=[s.issuer, "https://other.example"])}), 200)
    cid = "authgate-pkjwt-ec"
    wrong_key = ec.generate_private_key(ec.SECP256R1())
    refusals = {
        "wrong key": {"client_id": cid, "client_assertion_type": JWT_BEARER,
                      "client_assertion": assertion(cid, wrong_key, token_url, kid=s.client(cid)["key_id"])},
        "wrong key, no kid": {"client_id": cid, "client_assertion_type": JWT_BEARER,
                              "client_assertion": assertion(cid, wrong_key, token_url)},
        "aud elsewhere": pkjwt(s, cid, aud="https://other.example/token"),
        "aud the PAR endpoint": pkjwt(s, cid, aud=s.url("/par")),
        "expired": pkjwt(s, cid, exp=int(time.time()) - 60),
        "no exp": pkjwt(s, cid, exp=None),
        "no jti": pkjwt(s, cid, jti=None),
        "sub is not iss": pkjwt(s, cid, sub="someone"),
        "iss is another client": pkjwt(s, cid, iss="authgate-pkjwt-rsa"),
        "alg none": {"client_id": cid, "client_assertion_type": JWT_BEARER,
                     "client_assertion": assertion(cid, None, token_url, alg="none")},
        "HS256 with the public key": {"client_id": cid, "client_assertion_type": JWT_BEARER,
                                      "client_assertion": assertion(cid, json.dumps(public_jwk(s.key(cid))).encode(),
                                                                    token_url, alg="HS256")},
        "wrong assertion type": {**pkjwt(s, cid), "client_assertion_type": "urn:example"},
    }
    for name, credentials in refusals.items():
        response = s.token({**cc, **credentials})
        check(response.status_code == 401 and response.json().get("error") == "invalid_client",
              f"{name}: {response.status_code} {response.text[:200]}")
    replayed = pkjwt(s, cid)
    expect(s.token({**cc, **replayed}), 200)
    expect(s.token({**cc, **replayed}), 401, "invalid_client")
    # The password grant and refresh with an assertion.
    body = expect(s.token({"grant_type": "password", "username": "alice", "password": "alice-password-1",
                           **pkjwt(s, "authgate-pkjwt-rsa", alg="RS256")}), 200)
    expect(s.token({"grant_type": "password", "username": "alice", "password": "wrong",
                    **pkjwt(s, "authgate-pkjwt-rsa", alg="RS256")}), 400, "invalid_grant")
    expect(s.token({"grant_type": "refresh_token", "refresh_token": body["refresh_token"],
                    **pkjwt(s, "authgate-pkjwt-rsa", alg="RS256")}), 200)
    # Another client cannot use the token.
    expect(s.token({"grant_type": "refresh_token", "refresh_token": body["refresh_token"],
                    **pkjwt(s, "authgate-pkjwt-ec")}), 400)


def t_client_secret_jwt(s: IdpyServer) -> None:
    cid = "authgate-secretjwt"
    secret = s.secret(cid).encode()

    def credentials(key=secret, aud=None, alg="HS256"):
        return {"client_id": cid, "client_assertion_type": JWT_BEARER,
                "client_assertion": assertion(cid, key, aud or s.url("/token"), alg=alg)}

    body = expect(s.token({"grant_type": "client_credentials", **credentials()}), 200)
    check(jwt_claims(body["access_token"])["client_id"] == cid, "client_id")
    check(s.stats()["client_auth"][cid] == "client_secret_jwt", "stats")
    expect(s.token({"grant_type": "client_credentials", **credentials(aud=s.issuer)}), 200)
    expect(s.token({"grant_type": "client_credentials", **credentials(key=b"wrong secret")}), 401, "invalid_client")
    expect(s.token({"grant_type": "client_credentials", **credentials(aud="https://other.example")}), 401, "invalid_client")
    expect(s.token({"grant_type": "client_credentials", "client_id": cid, "client_secret": s.secret(cid)}),
           401, "invalid_client")  # its method is client_secret_jwt only
    expect(s.token({"grant_type": "client_credentials"}, auth=(cid, s.secret(cid))), 401, "invalid_client")


def t_client_secret_basic(s: IdpyServer) -> None:
    cid = "authgate-exchange"
    body = expect(s.token({"grant_type": "client_credentials"}, auth=(cid, s.secret(cid))), 200)
    check(body["token_type"] == "Bearer" and body["scope"] == "read write", f"cc {body}")
    check(s.stats()["client_auth"][cid] == "client_secret_basic", "stats basic")
    response = s.token({"grant_type": "client_credentials"}, auth=(cid, "wrong"))
    expect(response, 401, "invalid_client")
    check(response.headers.get("WWW-Authenticate", "").startswith("Basic"), "WWW-Authenticate Basic")
    expect(s.token({"grant_type": "client_credentials", "client_id": cid, "client_secret": s.secret(cid)}), 200)
    check(s.stats()["client_auth"][cid] == "client_secret_post", "stats post")
    expect(s.token({"grant_type": "client_credentials", "client_id": cid}), 401, "invalid_client")
    expect(s.token({"grant_type": "client_credentials", "scope": "admin"}, auth=(cid, s.secret(cid))), 400, "invalid_scope")
    # A client without the grant, an unknown grant.
    expect(s.token({"grant_type": "client_credentials", "client_id": "authgate-par"}), 400, "unauthorized_client")
    expect(s.token({"grant_type": "urn:example:magic"}, auth=(cid, s.secret(cid))), 400, "unsupported_grant_type")


def t_token_exchange(s: IdpyServer) -> None:
    cid = "authgate-exchange"
    auth = (cid, s.secret(cid))
    subject = password_grant(s, cid, scope="openid read write", client_secret=s.secret(cid))["access_token"]
    base = {"grant_type": TOKEN_EXCHANGE, "subject_token": subject, "subject_token_type": ACCESS_TOKEN_TYPE}
    body = expect(s.token({**base, "audience": "https://api.example.test", "scope": "read"}, auth=auth), 200)
    check(body["issued_token_type"] == ACCESS_TOKEN_TYPE and body["token_type"] == "Bearer", f"exchange {body}")
    claims = jwt_claims(body["access_token"])
    check("https://api.example.test" in claims["aud"] and claims["sub"] == "alice", f"exchanged claims {claims}")
    check(body["scope"] == "read", f"narrowed scope {body['scope']}")
    expect(s.resource(body["access_token"], scheme="Bearer"), 200)
    expect(s.token({**base, "audience": "https://forbidden.example.test"}, auth=auth), 400, "invalid_target")
    expect(s.token({**base, "resource": "https://forbidden.example.test"}, auth=auth), 400, "invalid_target")
    expect(s.token({**base, "resource": "https://api.example.test"}, auth=auth), 200)
    expect(s.token({**base, "requested_token_type": ACCESS_TOKEN_TYPE}, auth=auth), 200)
    expect(s.token({**base, "subject_token": "garbage"}, auth=auth), 400, "invalid_request")
    # Other clients, including with DPoP.
    body = expect(s.token({**base, "audience": "https://api.example.test", **pkjwt(s, "authgate-pkjwt-ec")}), 200)
    check(jwt_claims(body["access_token"])["client_id"] == "authgate-pkjwt-ec", "pkjwt exchange client_id")
    key = ec.generate_private_key(ec.SECP256R1())
    body = expect(s.token({**base, "audience": "https://api.example.test", "client_id": "authgate-dpop"},
                          proof=dpop_proof(key, "POST", s.url("/token"))), 200)
    check(body["token_type"] == "DPoP" and jwt_claims(body["access_token"])["cnf"]["jkt"] == thumbprint(public_jwk(key)),
          f"DPoP exchange {body}")
    expect(s.resource(body["access_token"], proof=dpop_proof(key, "GET", s.url("/resource"),
                                                             access_token=body["access_token"])), 200)
    expect(s.token({**base, "client_id": "authgate-dpop"}), 400, "invalid_dpop_proof")
    # A client without the grant.
    expect(s.token({**base, "client_id": "authgate-par"}), 400, "unauthorized_client")


def authorize(s: IdpyServer, params: dict) -> requests.Response:
    return s.http.get(s.url("/authorization"), params=params, allow_redirects=False)


def t_par(s: IdpyServer) -> None:
    cid = "authgate-par"
    verifier, challenge = pkce()
    redirect = "http://127.0.0.1:54321/callback"
    pushed = s.http.post(s.url("/par"), data={
        "client_id": cid, "response_type": "code", "redirect_uri": redirect, "scope": "openid read",
        "state": "state-1", "code_challenge": challenge, "code_challenge_method": "S256", "nonce": "n-1"})
    body = expect(pushed, 201)
    check(body["request_uri"].startswith("urn:") and body["expires_in"] > 0, f"PAR {body}")
    check(s.stats()["client_auth"][cid] == "none", "PAR stats")
    answer = authorize(s, {"client_id": cid, "request_uri": body["request_uri"]})
    check(answer.status_code == 302, f"authorization {answer.status_code} {answer.text[:200]}")
    location = answer.headers["Location"]
    check(location.startswith(redirect + "?"), f"Location {location}")
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    check(query["state"] == "state-1" and query["iss"] == s.issuer and query["code"], f"callback {query}")
    # The request_uri is single use.
    expect(authorize(s, {"client_id": cid, "request_uri": body["request_uri"]}), 400, "invalid_request")
    code_request = {"grant_type": "authorization_code", "code": query["code"], "redirect_uri": redirect,
                    "client_id": cid}
    expect(s.token({**code_request, "code_verifier": "wrong" * 10}), 400, "invalid_grant")
    # (the failed attempt does not use the code up)
    tokens = expect(s.token({**code_request, "code_verifier": verifier}), 200)
    claims = verify_id_token(tokens["id_token"], s.jwks, s.issuer, cid)
    check(claims["sub"] == "alice" and claims.get("nonce") == "n-1", f"id_token {claims}")
    refreshed = expect(s.token({"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
                                "client_id": cid}), 200)
    check(refreshed["access_token"] != tokens["access_token"], "refresh")
    expect(s.resource(refreshed["access_token"], scheme="Bearer"), 200)
    # Using the code again fails, and revokes what it gave (RFC 6749 §4.1.2).
    expect(s.token({**code_request, "code_verifier": verifier}), 400, "invalid_grant")
    expect(s.resource(refreshed["access_token"], scheme="Bearer"), 401, "invalid_token")
    expect(s.token({"grant_type": "refresh_token", "refresh_token": refreshed["refresh_token"], "client_id": cid}),
           400, "invalid_grant")

    # PAR is required for this client.
    plain = {"client_id": cid, "response_type": "code", "redirect_uri": redirect, "scope": "openid",
             "state": "s", "code_challenge": challenge, "code_challenge_method": "S256"}
    expect(authorize(s, plain), 400, "invalid_request")
    expect(authorize(s, {"client_id": cid, "request_uri": "urn:ietf:params:oauth:request_uri:nope"}), 400)
    # Another client's request_uri.
    pushed = expect(s.http.post(s.url("/par"), data={**plain, "redirect_uri": "http://127.0.0.1:1234/callback"}), 201)
    expect(authorize(s, {"client_id": "authgate-dpop", "request_uri": pushed["request_uri"]}), 400)
    # Not a registered redirect URI (path or host), no PKCE, an unknown client.
    for wrong in ({"redirect_uri": "http://127.0.0.1:1234/other"}, {"redirect_uri": "http://evil.example:1234/callback"},
                  {"redirect_uri": "https://127.0.0.1:1234/callback"}):
        expect(s.http.post(s.url("/par"), data={**plain, **wrong}), 400, "invalid_request")
    no_pkce = {k: v for k, v in plain.items() if not k.startswith("code_")}
    pushed = s.http.post(s.url("/par"), data=no_pkce)
    expect(pushed, 400, "invalid_request")
    expect(s.http.post(s.url("/par"), data={**plain, "code_challenge_method": "plain"}), 400, "invalid_request")
    expect(s.http.post(s.url("/par"), data={**plain, "client_id": "nobody"}), 401, "invalid_client")

    for mode, status, error in [("par-fail", 500, "server_error"), ("par-error", 400, "invalid_request")]:
        s.mode(mode)
        try:
            expect(s.http.post(s.url("/par"), data={**plain, "redirect_uri": redirect}), status, error)
        finally:
            s.mode("normal")
    expect(s.http.post(s.url("/par"), data={**plain, "redirect_uri": redirect}), 201)
    check(s.stats()["par_requests"] >= 8, "par_requests counted")


def t_par_dpop_and_confidential(s: IdpyServer) -> None:
    """PAR with a DPoP proof (the code is bound to its key, RFC 9449 §10), dpop_jkt on a plain
    authorization request, and PAR by a private_key_jwt client (aud the PAR endpoint)."""
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    redirect = "http://127.0.0.1:41000/callback"

    def code_for(params: dict, proof=None, credentials=None) -> tuple[str, str]:
        verifier, challenge = pkce()
        request = {"response_type": "code", "redirect_uri": redirect, "scope": "openid read", "state": "p",
                   "code_challenge": challenge, "code_challenge_method": "S256", **params}
        if credentials is None:
            answer = authorize(s, request)
        else:
            pushed = expect(s.http.post(s.url("/par"), data={**request, **credentials},
                                        headers={"DPoP": proof} if proof else {}), 201)
            answer = authorize(s, {"client_id": params["client_id"], "request_uri": pushed["request_uri"]})
        check(answer.status_code == 302, f"authorization {answer.status_code} {answer.text[:200]}")
        return parse_qs(urlsplit(answer.headers["Location"]).query)["code"][0], verifier

    token_url = s.url("/token")
    for how in ("PAR proof", "dpop_jkt"):
        if how == "PAR proof":
            code, verifier = code_for({"client_id": "authgate-dpop"}, proof=dpop_proof(key, "POST", s.url("/par")),
                                      credentials={})
        else:
            code, verifier = code_for({"client_id": "authgate-dpop", "dpop_jkt": thumbprint(public_jwk(key))})
        data = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect, "code_verifier": verifier,
                "client_id": "authgate-dpop"}
        expect(s.token(data, proof=dpop_proof(other, "POST", token_url)), 400, "invalid_dpop_proof")
        body = expect(s.token(data, proof=dpop_proof(key, "POST", token_url)), 200)
        check(jwt_claims(body["access_token"])["cnf"]["jkt"] == thumbprint(public_jwk(key)), f"{how} cnf")
    expect(s.http.post(s.url("/par"), data={"client_id": "authgate-dpop", "dpop_jkt": "other"},
                       headers={"DPoP": dpop_proof(key, "POST", s.url("/par"))}), 400, "invalid_dpop_proof")
    expect(s.http.post(s.url("/par"), data={"client_id": "authgate-dpop"},
                       headers={"DPoP": dpop_proof(key, "POST", s.url("/token"))}), 400, "invalid_dpop_proof")

    cid = "authgate-pkjwt-ec"
    for aud in (s.url("/par"), s.issuer, s.url("/token")):
        code, verifier = code_for({"client_id": cid}, credentials=pkjwt(s, cid, aud=aud))
        check(s.stats()["client_auth"][cid] == "private_key_jwt", "PAR client_auth")
    body = expect(s.token({"grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
                           "code_verifier": verifier, **pkjwt(s, cid)}), 200)
    verify_id_token(body["id_token"], s.jwks, s.issuer, cid)
    pushed = s.http.post(s.url("/par"), data={"response_type": "code", "redirect_uri": redirect,
                                              **pkjwt(s, cid, aud="https://other.example")})
    expect(pushed, 401, "invalid_client")


def t_code_flow_confidential(s: IdpyServer) -> None:
    """The authorization code grant without PAR, for a private_key_jwt client and for the DPoP one."""
    for cid in ("authgate-pkjwt-ec", "authgate-dpop"):
        verifier, challenge = pkce()
        redirect = "http://127.0.0.1:40000/callback"
        answer = authorize(s, {"client_id": cid, "response_type": "code", "redirect_uri": redirect, "scope": "openid read",
                               "state": "xyz", "code_challenge": challenge, "code_challenge_method": "S256"})
        check(answer.status_code == 302, f"{cid} authorization {answer.status_code} {answer.text[:200]}")
        query = {k: v[0] for k, v in parse_qs(urlsplit(answer.headers["Location"]).query).items()}
        check(query.get("code") and query["state"] == "xyz", f"{cid} callback {query}")
        data = {"grant_type": "authorization_code", "code": query["code"], "redirect_uri": redirect,
                "code_verifier": verifier}
        if cid == "authgate-dpop":
            key = ec.generate_private_key(ec.SECP256R1())
            body = expect(s.token({**data, "client_id": cid}, proof=dpop_proof(key, "POST", s.url("/token"))), 200)
            check(body["token_type"] == "DPoP" and jwt_claims(body["access_token"])["cnf"]["jkt"]
                  == thumbprint(public_jwk(key)), f"DPoP code flow {body}")
        else:
            body = expect(s.token({**data, **pkjwt(s, cid)}), 200)
            check(body["token_type"] == "Bearer" and "refresh_token" in body, f"code flow {body}")
        verify_id_token(body["id_token"], s.jwks, s.issuer, cid)
    # No PKCE.
    answer = authorize(s, {"client_id": "authgate-pkjwt-ec", "response_type": "code",
                           "redirect_uri": "http://127.0.0.1:40000/callback", "scope": "openid", "state": "s"})
    check(answer.status_code == 302, f"no PKCE: {answer.status_code}")
    query = parse_qs(urlsplit(answer.headers["Location"]).query)
    check(query["error"] == ["invalid_request"] and query["state"] == ["s"] and query["iss"] == [s.issuer],
          f"no PKCE: {answer.headers['Location']}")
    # An unregistered redirect URI is not redirected to.
    answer = authorize(s, {"client_id": "authgate-pkjwt-ec", "response_type": "code", "scope": "openid",
                           "redirect_uri": "http://127.0.0.1:40000/elsewhere", "state": "s"})
    expect(answer, 400, "invalid_request")


def t_registration(s: IdpyServer) -> None:
    """RFC 7591 registration of a public client, a code flow through it, the RFC 7592 read and
    delete; then its token requests are invalid_client. A refused registration."""
    discovery = s.http.get(s.url("/.well-known/openid-configuration")).json()
    check(discovery.get("registration_endpoint") == s.url("/registration"), f"registration_endpoint {discovery}")
    request = {"redirect_uris": ["http://127.0.0.1/callback"], "grant_types": ["authorization_code", "refresh_token"],
               "response_types": ["code"], "token_endpoint_auth_method": "none", "application_type": "native",
               "client_name": "selftest"}
    client = expect(s.http.post(s.url("/registration"), json=request), 201)
    check(client["client_id"] and "client_secret" not in client and client["token_endpoint_auth_method"] == "none"
          and client["redirect_uris"] == request["redirect_uris"], f"registration {client}")
    uri, rat = client["registration_client_uri"], client["registration_access_token"]
    check(uri.startswith(s.url("/registration_api?")), f"registration_client_uri {uri}")
    verifier, challenge = pkce()
    redirect = "http://127.0.0.1:40001/callback"  # any port (RFC 8252 §7.3)
    answer = authorize(s, {"client_id": client["client_id"], "response_type": "code", "redirect_uri": redirect,
                           "scope": "openid", "state": "r", "code_challenge": challenge, "code_challenge_method": "S256"})
    check(answer.status_code == 302, f"authorization {answer.status_code} {answer.text[:200]}")
    code = parse_qs(urlsplit(answer.headers["Location"]).query)["code"][0]
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect, "code_verifier": verifier,
            "client_id": client["client_id"]}
    body = expect(s.token(data), 200)
    expect(s.token({"grant_type": "refresh_token", "refresh_token": body["refresh_token"],
                    "client_id": client["client_id"]}), 200)
    read = expect(s.http.get(uri, headers={"Authorization": f"Bearer {rat}"}), 200)
    check(read["client_id"] == client["client_id"], f"read {read}")
    expect(s.http.get(uri, headers={"Authorization": "Bearer wrong"}), 401, "invalid_token")
    expect(s.http.delete(uri, headers={"Authorization": "Bearer wrong"}), 401, "invalid_token")
    deleted = s.http.delete(uri, headers={"Authorization": f"Bearer {rat}"})
    check(deleted.status_code == 204 and not deleted.content, f"delete {deleted.status_code} {deleted.text}")
    expect(s.token({**data, "grant_type": "refresh_token", "refresh_token": body["refresh_token"]}), 401, "invalid_client")
    expect(s.http.delete(uri, headers={"Authorization": f"Bearer {rat}"}), 401, "invalid_token")
    refused = expect(s.http.post(s.url("/registration"), json={**request, "redirect_uris": ["ftp://x"],
                                                               "application_type": "web"}), 400, "invalid_redirect_uri")
    check(refused.get("error_description"), f"refusal {refused}")
    stats = s.stats()
    check(stats["registrations"] >= 1 and stats["deregistrations"] >= 1, f"stats {stats}")
    # The initial-access-token mode: the mode's nonce as Bearer, else 401 invalid_token.
    token = s.mode("initial-access-token")["nonce"]
    try:
        expect(s.http.post(s.url("/registration"), json=request), 401, "invalid_token")
        expect(s.http.post(s.url("/registration"), json=request, headers={"Authorization": "Bearer wrong"}), 401, "invalid_token")
        gated = expect(s.http.post(s.url("/registration"), json=request, headers={"Authorization": f"Bearer {token}"}), 201)
        check(gated["client_id"] and gated["client_id"] != client["client_id"], f"gated registration {gated}")
        check(s.stats()["registrations"] == stats["registrations"] + 1, "only the registration with the token counts")
    finally:
        s.mode("normal")


def t_expiry(s: IdpyServer) -> None:
    body = expect(s.token({"grant_type": "client_credentials"},
                          auth=("authgate-exchange", s.secret("authgate-exchange"))), 200)
    check(body["expires_in"] <= 2, f"expires_in {body['expires_in']}")
    expect(s.resource(body["access_token"], scheme="Bearer"), 200)
    time.sleep(3.1)
    expect(s.resource(body["access_token"], scheme="Bearer"), 401, "invalid_token")


def t_mtls(s: IdpyServer) -> None:
    d = s.discovery
    check({"tls_client_auth", "self_signed_tls_client_auth"} <= set(d["token_endpoint_auth_methods_supported"]),
          "mTLS auth methods")
    check(d["mtls_endpoint_aliases"]["token_endpoint"] == s.url("/mtls/token") and
          d["tls_client_certificate_bound_access_tokens"] is True, "aliases")
    ca_cert = (s.info["client_cert_file"], s.info["client_key_file"])
    mtls, self_signed = s.client("authgate-mtls"), s.client("authgate-mtls-self")
    check(mtls["cert_file"] == s.info["client_cert_file"], "authgate-mtls cert_file")
    self_cert = (self_signed["cert_file"], self_signed["key_file"])
    cc = {"grant_type": "client_credentials"}

    def x5t(path):
        cert = x509.load_pem_x509_certificate(Path(path).read_bytes())
        return b64url(hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest())

    for path in ("/mtls/token", "/token"):
        body = expect(s.token({**cc, "client_id": "authgate-mtls"}, cert=ca_cert, path=path), 200)
        check(jwt_claims(body["access_token"])["cnf"] == {"x5t#S256": x5t(ca_cert[0])}, f"cnf {body}")
        check(body["token_type"] == "Bearer", "mTLS token_type")
        check(s.stats()["client_auth"]["authgate-mtls"] == "tls_client_auth", "stats tls_client_auth")
        check(s.stats()["last_token_request"]["path"] == path, "stats path")
    token = body["access_token"]
    expect(s.resource(token, scheme="Bearer", cert=ca_cert), 200)
    expect(s.resource(token, scheme="Bearer"), 401, "invalid_token")
    expect(s.resource(token, scheme="Bearer", cert=self_cert), 401, "invalid_token")
    expect(s.token({**cc, "client_id": "authgate-mtls"}, path="/mtls/token"), 401, "invalid_client")
    expect(s.token({**cc, "client_id": "authgate-mtls"}, cert=self_cert, path="/mtls/token"), 401, "invalid_client")

    body = expect(s.token({**cc, "client_id": "authgate-mtls-self"}, cert=self_cert, path="/mtls/token"), 200)
    check(jwt_claims(body["access_token"])["cnf"] == {"x5t#S256": x5t(self_cert[0])}, "self-signed cnf")
    check(s.stats()["client_auth"]["authgate-mtls-self"] == "self_signed_tls_client_auth", "stats self-signed")
    expect(s.token({**cc, "client_id": "authgate-mtls-self"}, cert=ca_cert, path="/mtls/token"), 401, "invalid_client")
    expect(s.token({**cc, "client_id": "authgate-mtls-self"}, path="/mtls/token"), 401, "invalid_client")

    # The password grant and refresh with a certificate.
    body = expect(s.token({"grant_type": "password", "username": "alice", "password": "alice-password-1",
                           "client_id": "authgate-mtls"}, cert=ca_cert, path="/mtls/token"), 200)
    expect(s.token({"grant_type": "refresh_token", "refresh_token": body["refresh_token"], "client_id": "authgate-mtls"},
                   cert=ca_cert, path="/mtls/token"), 200)
    # PAR at the alias with a certificate.
    verifier, challenge = pkce()
    expect(s.http.post(s.url("/mtls/par"), cert=ca_cert, data={
        "client_id": "authgate-mtls", "response_type": "code", "redirect_uri": "http://127.0.0.1:9/callback",
        "scope": "openid", "code_challenge": challenge, "code_challenge_method": "S256"}), 201)
    # The other clients work without a certificate, or with one; DPoP at the alias (htu the alias).
    key = ec.generate_private_key(ec.SECP256R1())
    password_grant(s, "authgate-dpop", key)
    data = {"grant_type": "password", "username": "alice", "password": "alice-password-1", "client_id": "authgate-dpop"}
    expect(s.token(data, proof=dpop_proof(key, "POST", s.url("/mtls/token")), path="/mtls/token"), 200)
    expect(s.token(data, proof=dpop_proof(key, "POST", s.url("/token")), path="/mtls/token"), 400, "invalid_dpop_proof")
    expect(s.token({**cc, **pkjwt(s, "authgate-pkjwt-ec")}, cert=ca_cert), 200)
    check(s.stats()["client_auth"]["authgate-pkjwt-ec"] == "private_key_jwt", "pkjwt with a certificate")
    for aud in (s.url("/mtls/token"), s.url("/token"), s.issuer):  # the alias is an audience too
        expect(s.token({**cc, **pkjwt(s, "authgate-pkjwt-ec", aud=aud)}, path="/mtls/token"), 200)
    expect(s.token({**cc, **pkjwt(s, "authgate-pkjwt-ec", aud=s.url("/mtls/par"))}), 401, "invalid_client")
    # A certificate the server does not trust ends the handshake.
    stranger_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "authgate-mtls")])
    now = time.time()
    stranger = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(stranger_key.public_key())
                .serial_number(1).not_valid_before(datetime.datetime.fromtimestamp(now - 86400))
                .not_valid_after(datetime.datetime.fromtimestamp(now + 86400)).sign(stranger_key, hashes.SHA256()))
    cert_path, key_path = s.workdir / "stranger.pem", s.workdir / "stranger-key.pem"
    cert_path.write_bytes(stranger.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(stranger_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
    try:
        response = s.token({**cc, "client_id": "authgate-mtls"}, cert=(str(cert_path), str(key_path)), path="/mtls/token")
        check(False, f"an untrusted certificate got {response.status_code}")
    except requests.exceptions.RequestException:
        pass


# -- workload identity federation


def t_platform(s: IdpyServer) -> None:
    """The platform's discovery, JWKS and rotating token file (kubelet's layout), and
    /test/platform-token."""
    platform = s.info["platform"]
    check(platform["issuer"] == s.url("/platform") and platform["subject"] == PLATFORM_SUBJECT
          and platform["audience"] == s.issuer and platform["jwks"] == s.url("/platform/jwks")
          and platform["token_file"] == str(s.workdir / "platform" / "token"), f"platform {platform}")
    check(s.info["service_account"] == {"issuer": "authgate-sa@authgate.test", "key_id": "authgate-sa-1",
                                        "key_file": str(s.workdir / "authgate-sa-key.pem")},
          f"service_account {s.info['service_account']}")
    before = s.stats()["requests"]
    discovery = expect(s.http.get(s.url("/platform/.well-known/openid-configuration")), 200)
    check(discovery["issuer"] == platform["issuer"] and discovery["jwks_uri"] == platform["jwks"], f"{discovery}")
    jwks = expect(s.http.get(platform["jwks"]), 200)
    check([k["kid"] for k in jwks["keys"]] == ["platform-1"] and all("d" not in k for k in jwks["keys"]), f"{jwks}")
    check(s.stats()["requests"] == before, "the platform's requests are counted")

    directory = s.workdir / "platform"
    check(os.readlink(directory / "token") == "..data/token", "token -> ..data/token")
    for _ in range(3):  # (a rotation between the two reads removes the directory read first)
        first_dir = os.readlink(directory / "..data")
        try:
            first = (directory / first_dir / "token").read_text()
            break
        except FileNotFoundError:
            continue
    check(first_dir.startswith("..") and first, f"..data -> {first_dir}")
    header, claims = verify_es256(first, jwks)
    check(header == {"alg": "ES256", "typ": "JWT", "kid": "platform-1"}, f"header {header}")
    now = time.time()
    check(claims["iss"] == platform["issuer"] and claims["sub"] == PLATFORM_SUBJECT and claims["aud"] == [s.issuer]
          and claims["exp"] - claims["iat"] == 600 and claims["nbf"] == claims["iat"]
          and abs(claims["iat"] - now) < 5 and claims["jti"], f"claims {claims}")
    deadline = time.monotonic() + 6
    while s.platform_file_token() == first and time.monotonic() < deadline:
        time.sleep(0.1)
    second = s.platform_file_token()
    check(second != first, "the token file did not change")
    check(verify_es256(second, jwks)[1]["jti"] != claims["jti"], "the same jti twice")
    check(not (directory / first_dir).exists(), f"{first_dir} was not removed")
    check(stat.S_IMODE(os.stat(directory / "token").st_mode) == 0o644, "token mode")

    made = s.platform_token(lifetime=30, issued_ago=100, not_before_in=50, sub="someone", aud="https://x.example",
                            iss="https://evil.example")
    header, claims = verify_es256(made, jwks)
    now = time.time()
    check(claims["sub"] == "someone" and claims["aud"] == "https://x.example" and claims["iss"] == "https://evil.example"
          and abs(claims["iat"] - (now - 100)) < 5 and claims["exp"] == claims["iat"] + 30
          and abs(claims["nbf"] - (now + 50)) < 5, f"made {claims}")
    claims = jwt_claims(s.platform_token())
    check(claims["exp"] - claims["iat"] == 600 and claims["aud"] == [s.issuer], f"default {claims}")
    expect(s.http.post(s.url("/test/platform-token"), json={"lifetime": "long"}), 400, "invalid_request")
    expect(s.http.post(s.url("/test/platform-token"), data="[1]"), 400, "invalid_request")


def federated(s: IdpyServer, token: str, client_id: str = "authgate-federated") -> dict:
    return {"grant_type": "client_credentials", "client_id": client_id,
            "client_assertion_type": JWT_BEARER, "client_assertion": token}


def signed_elsewhere(token: str) -> str:
    """The claims of token signed by another key, with the same header."""
    head, payload, _ = token.split(".")
    return sign(b64url_json(head), b64url_json(payload), ec.generate_private_key(ec.SECP256R1()))


def t_federated_client(s: IdpyServer) -> None:
    """(a) authgate-federated authenticates with the platform's JWT as its client assertion."""
    token = s.platform_file_token()
    body = expect(s.token(federated(s, token)), 200)
    claims = jwt_claims(body["access_token"])
    check(claims["sub"] == "authgate-federated" and claims["client_id"] == "authgate-federated"
          and body["token_type"] == "Bearer" and body["scope"] == "read write" and "refresh_token" not in body,
          f"federated {body} {claims}")
    check(s.stats()["client_auth"]["authgate-federated"] == "federated_client_assertion", "stats client_auth")
    expect(s.resource(body["access_token"], scheme="Bearer"), 200)
    expect(s.token(federated(s, token)), 200)  # the same token again: no jti check
    check(s.stats()["federation"]["client_assertion"][-2:] == [jwt_claims(token)["jti"]] * 2,
          f"stats {s.stats()['federation']}")
    expect(s.token({**federated(s, s.platform_token(aud=[s.issuer, "https://other.example"])), "scope": "read"}), 200)

    refusals = {
        "expired": (s.platform_token(lifetime=60, issued_ago=120), "expired"),
        "wrong subject": (s.platform_token(sub="system:serviceaccount:apps:other"), "federated subject"),
        "not yet valid": (s.platform_token(not_before_in=120), "not valid yet"),
        "issued in the future": (s.platform_token(issued_ago=-120), "not valid yet"),
        "another audience": (s.platform_token(aud="https://other.example"), "aud"),
        "another issuer": (s.platform_token(iss="https://evil.example"), "iss"),
        "bad signature": (signed_elsewhere(token), "signature"),
        "not a JWT": ("garbage", "not a signed JWT"),
    }
    for name, (assertion_jwt, reason) in refusals.items():
        body = expect(s.token(federated(s, assertion_jwt)), 401, "invalid_client")
        description = body.get("error_description", "")
        check(reason in description and "private_key_jwt" not in description, f"{name}: {description}")
    expect(s.token({**federated(s, token), "client_assertion_type": "urn:example"}), 401, "invalid_client")
    # Within the 30 s leeway.
    expect(s.token(federated(s, s.platform_token(not_before_in=10, issued_ago=-10))), 200)
    # The platform's JWT is no private_key_jwt assertion for another client, nor one for none.
    expect(s.token(federated(s, token, client_id="authgate-pkjwt-ec")), 401, "invalid_client")
    expect(s.token({"grant_type": "client_credentials", "client_id": "authgate-federated"}), 401, "invalid_client")
    # A service-account assertion is not a platform token.
    sa = s.info["service_account"]
    key = serialization.load_pem_private_key(Path(sa["key_file"]).read_bytes(), None)
    expect(s.token(federated(s, assertion(sa["issuer"], key, s.issuer, kid=sa["key_id"]))), 401, "invalid_client")


def service_account_assertion(s: IdpyServer, **overrides) -> str:
    """An assertion signed in the test with the service account's key (as Google's are)."""
    sa = s.info["service_account"]
    key = serialization.load_pem_private_key(Path(sa["key_file"]).read_bytes(), None)
    return assertion(sa["issuer"], key, overrides.pop("aud", s.url("/token")), kid=sa["key_id"], **overrides)


def t_jwt_bearer(s: IdpyServer) -> None:
    """(b) the JWT bearer grant with the platform's token and with service-account assertions."""
    grant = {"grant_type": JWT_BEARER_GRANT, "client_id": "authgate-workload"}
    token = s.platform_file_token()
    body = expect(s.token({**grant, "assertion": token}), 200)
    claims = jwt_claims(body["access_token"])
    check(claims["sub"] == PLATFORM_SUBJECT and claims["client_id"] == "authgate-workload"
          and body["scope"] == "read write" and body["token_type"] == "Bearer" and "refresh_token" not in body
          and "id_token" not in body, f"jwt-bearer {body} {claims}")
    answer = expect(s.resource(body["access_token"], scheme="Bearer"), 200)
    check(answer["sub"] == PLATFORM_SUBJECT, f"resource {answer}")
    body = expect(s.token({**grant, "assertion": token, "scope": "openid read"}), 200)
    check(body["scope"] == "openid read" and "id_token" in body, f"openid {body}")
    expect(s.token({**grant, "assertion": s.platform_token(aud=s.url("/token"))}), 200)
    body = expect(s.token({**grant, "assertion": token, "audience": "https://api.example.test"}), 200)
    check("https://api.example.test" in jwt_claims(body["access_token"])["aud"], f"audience {body}")
    expect(s.token({**grant, "assertion": token, "resource": "https://forbidden.example.test"}), 400, "invalid_target")
    check(s.stats()["federation"]["jwt_bearer"][:2] == [jwt_claims(token)["jti"]] * 2,
          f"stats {s.stats()['federation']}")

    sa = service_account_assertion(s, scope="read")
    body = expect(s.token({**grant, "assertion": sa}), 200)
    check(jwt_claims(body["access_token"])["sub"] == "authgate-sa@authgate.test" and body["scope"] == "read",
          f"service account {body}")
    check(s.stats()["federation"]["jwt_bearer"][-1] == jwt_claims(sa)["jti"], "stats service account jti")
    refused = expect(s.token({**grant, "assertion": sa}), 400, "invalid_grant")
    check("jti" in refused.get("error_description", ""), f"reused jti: {refused}")
    expect(s.token({**grant, "assertion": service_account_assertion(s, aud=s.issuer), "scope": "write"}), 200)

    refusals = {
        "expired platform token": s.platform_token(lifetime=60, issued_ago=120),
        "platform token for another audience": s.platform_token(aud="https://other.example"),
        "untrusted issuer": s.platform_token(iss="https://evil.example"),
        "no jti": service_account_assertion(s, jti=None),
        "no exp": service_account_assertion(s, exp=None),
        "more than an hour": service_account_assertion(s, exp=int(time.time()) + 7200),
        "sub is not iss": service_account_assertion(s, sub="someone"),
        "another audience": service_account_assertion(s, aud="https://other.example"),
        "expired": service_account_assertion(s, iat=int(time.time()) - 600, exp=int(time.time()) - 60),
        "wrong key": signed_elsewhere(service_account_assertion(s)),
        "HS256": sign({"alg": "HS256", "typ": "JWT"}, jwt_claims(service_account_assertion(s)), b"k" * 32),
    }
    for name, assertion_jwt in refusals.items():
        body = expect(s.token({**grant, "assertion": assertion_jwt}), 400, "invalid_grant")
        check(body.get("error_description"), f"{name}: no error_description")
    expect(s.token({**grant, "assertion": service_account_assertion(s, scope="admin")}), 400, "invalid_scope")
    expect(s.token(grant), 400, "invalid_request")
    # A client without the grant.
    auth = ("authgate-exchange", s.secret("authgate-exchange"))
    expect(s.token({"grant_type": JWT_BEARER_GRANT, "assertion": token}, auth=auth), 400, "unauthorized_client")


def t_platform_exchange(s: IdpyServer) -> None:
    """(c) token exchange of the platform's JWT (RFC 8693) for an access token."""
    token = s.platform_file_token()
    base = {"grant_type": TOKEN_EXCHANGE, "subject_token": token, "subject_token_type": JWT_TOKEN_TYPE,
            "client_id": "authgate-workload"}
    body = expect(s.token(base), 200)
    check(body["issued_token_type"] == ACCESS_TOKEN_TYPE and body["token_type"] == "Bearer"
          and 0 < body["expires_in"] <= 3600 and body["scope"] == "read write" and "refresh_token" not in body,
          f"exchange {body}")
    answer = expect(s.resource(body["access_token"], scheme="Bearer"), 200)
    check(answer["sub"] == PLATFORM_SUBJECT and answer["client_id"] == "authgate-workload", f"resource {answer}")
    body = expect(s.token({**base, "subject_token_type": ID_TOKEN_TYPE, "audience": "https://api.example.test",
                           "scope": "read"}), 200)
    check("https://api.example.test" in jwt_claims(body["access_token"])["aud"] and body["scope"] == "read",
          f"audience {body}")
    expect(s.token({**base, "resource": "https://api.example.test"}), 200)
    # A confidential client, and DPoP.
    auth = ("authgate-exchange", s.secret("authgate-exchange"))
    body = expect(s.token({k: v for k, v in base.items() if k != "client_id"}, auth=auth), 200)
    check(jwt_claims(body["access_token"])["client_id"] == "authgate-exchange", f"confidential {body}")
    key = ec.generate_private_key(ec.SECP256R1())
    body = expect(s.token(base, proof=dpop_proof(key, "POST", s.url("/token"))), 200)
    check(body["token_type"] == "DPoP" and jwt_claims(body["access_token"])["cnf"] == {"jkt": thumbprint(public_jwk(key))},
          f"DPoP {body}")
    check(s.stats()["federation"]["subject_token"][:2] == [jwt_claims(token)["jti"]] * 2,
          f"stats {s.stats()['federation']}")

    for name, subject in {"expired": s.platform_token(lifetime=60, issued_ago=120),
                          "another audience": s.platform_token(aud=s.url("/token")),
                          "bad signature": signed_elsewhere(token), "garbage": "garbage"}.items():
        body = expect(s.token({**base, "subject_token": subject}), 400, "invalid_grant")
        check(body.get("error_description"), f"{name}: no error_description")
        if name == "expired":
            check("expired" in body["error_description"], f"expired: {body}")
    expect(s.token({**base, "audience": "https://forbidden.example.test"}), 400, "invalid_target")
    expect(s.token({**base, "scope": "admin"}), 400, "invalid_scope")
    expect(s.token({**base, "requested_token_type": "urn:ietf:params:oauth:token-type:refresh_token"}),
           400, "invalid_request")
    # A service-account assertion is no platform token here.
    expect(s.token({**base, "subject_token": service_account_assertion(s)}), 400, "invalid_grant")
    # The exchange of this server's own access tokens, by the public workload client too.
    subject = password_grant(s, "authgate-exchange", scope="read write", client_secret=s.secret("authgate-exchange"))
    body = expect(s.token({**base, "subject_token": subject["access_token"], "subject_token_type": ACCESS_TOKEN_TYPE}), 200)
    check(jwt_claims(body["access_token"])["sub"] == "alice", f"access token exchange {body}")
    # No token in the server's log.
    log = (s.workdir.with_suffix(".log")).read_text()
    check(token not in log and token.split(".")[1] not in log, "a platform token in the log")


def t_stats(s: IdpyServer) -> None:
    stats = s.stats()
    for name in ("token_requests", "par_requests", "authorization_requests", "resource_requests",
                 "dpop_proofs", "dpop_proofs_refused", "nonce_challenges"):
        check(isinstance(stats[name], int), f"stats {name}")
    check(stats["requests"].get("POST /token", 0) == stats["token_requests"], "requests per path")
    check(all(not path.startswith("/test") for path in (k.split(" ", 1)[1] for k in stats["requests"])),
          "control requests not counted")
    check(s.http.post(s.url("/test/mode"), json={"mode": "bogus"}).status_code == 400, "unknown mode")
    expect(s.http.post(s.url("/test/mode"), data={"mode": "normal"}), 200)
    check(all(stats["federation"][use] for use in ("client_assertion", "jwt_bearer", "subject_token")),
          f"federation {stats['federation']}")
    after = s.http.post(s.url("/test/reset")).json()
    check(after["token_requests"] == 0 and after["client_auth"] == {}, "reset")
    check(after["federation"] == {"client_assertion": [], "jwt_bearer": [], "subject_token": []},
          f"reset federation {after['federation']}")


def t_parallel_and_stop(tmp: Path) -> None:
    servers = [IdpyServer(tmp / f"parallel-{i}") for i in range(2)]
    try:
        ports = {server.info["port"] for server in servers}
        check(len(ports) == 2, f"ports {ports}")
        for server in servers:
            key = ec.generate_private_key(ec.SECP256R1())
            password_grant(server, "authgate-dpop", key)
        platform_keys = [k["x"] for k in servers[0].http.get(servers[0].info["platform"]["jwks"]).json()["keys"]]
        service_account_key = Path(servers[0].info["service_account"]["key_file"]).read_bytes()
    finally:
        codes = [server.stop() for server in servers]
    check(codes == [0, 0], f"exit statuses {codes}")
    # The same directory again: same secrets and keys.
    again = IdpyServer(tmp / "parallel-0")
    try:
        expect(again.token({"grant_type": "client_credentials", **pkjwt(again, "authgate-pkjwt-ec")}), 200)
        check([k["x"] for k in again.http.get(again.info["platform"]["jwks"]).json()["keys"]] == platform_keys,
              "another platform key after a restart")
        check(Path(again.info["service_account"]["key_file"]).read_bytes() == service_account_key,
              "another service-account key after a restart")
        expect(again.token(federated(again, again.platform_file_token())), 200)
    finally:
        check(again.stop() == 0, "exit status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="show the servers' logs")
    parser.add_argument("-k", metavar="SUBSTRING", help="only the checks whose name has it")
    args = parser.parse_args()
    failures = []
    with tempfile.TemporaryDirectory(prefix="idpy-selftest-") as tmp:
        tmp = Path(tmp)
        plain = IdpyServer(tmp / "plain")
        short = IdpyServer(tmp / "short", "--access-token-lifetime", "2")
        mtls = IdpyServer(tmp / "mtls", "--mtls")
        print(f"start-up: {plain.startup:.2f} s, {short.startup:.2f} s, {mtls.startup:.2f} s (--mtls)")
        checks = [(name, fn, plain) for name, fn in [
            ("discovery", t_discovery), ("files", t_files), ("dpop token", t_dpop_token),
            ("dpop required", t_dpop_required), ("dpop bad proofs", t_dpop_bad_proofs),
            ("dpop nonce modes", t_dpop_nonce), ("resource", t_resource), ("userinfo", t_userinfo),
            ("dpop refresh", t_dpop_refresh), ("private_key_jwt", t_private_key_jwt),
            ("client_secret_jwt", t_client_secret_jwt), ("client_secret_basic", t_client_secret_basic),
            ("token exchange", t_token_exchange), ("par", t_par), ("par with dpop or pkjwt", t_par_dpop_and_confidential),
            ("code flow", t_code_flow_confidential), ("registration", t_registration),
            ("platform", t_platform), ("federated client", t_federated_client), ("jwt bearer", t_jwt_bearer),
            ("platform exchange", t_platform_exchange), ("stats", t_stats)]]
        checks += [("expiry", t_expiry, short), ("mtls", t_mtls, mtls),
                   ("parallel and restart", lambda _: t_parallel_and_stop(tmp), None)]
        for name, fn, server in checks:
            if args.k and args.k not in name:
                continue
            try:
                fn(server)
                print(f"ok      {name}")
            except Exception as error:
                failures.append(name)
                print(f"FAILED  {name}: {error}")
                if not isinstance(error, CheckFailed):
                    traceback.print_exc()
        statuses = [server.stop() for server in (plain, short, mtls)]
        if statuses != [0, 0, 0]:
            failures.append("exit statuses")
            print(f"FAILED  exit statuses {statuses}")
        if failures or args.verbose:
            for log in sorted(tmp.glob("*.log")):
                print(f"--- {log.name}\n{log.read_text()}", file=sys.stderr)
    print(f"{len(failures)} failed: {', '.join(failures)}" if failures else "all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
