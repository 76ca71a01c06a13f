"""Test helpers: loopback HTTP servers that record what they were sent (the Authorization
header only as a fingerprint, so that no token reaches the test output), a DPoP resource that
verifies proofs, clients that count their RPC calls, and one way to drive each HTTP library
through its auth class."""

import asyncio
import base64
import concurrent.futures
import hashlib
import http.server
import json
import ssl
import threading
import time

import httpx
import requests
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from authgate_client import AsyncClient, AsyncHTTPXAuth, AuthGateAuth, Client, HTTPXAuth

LIBRARIES = ["requests", "httpx", "httpx-async"]


def fingerprint(secret):
    """What a test compares and may print instead of a token or header value."""
    return None if secret is None else hashlib.sha256(secret.encode()).hexdigest()[:12]


class Loopback:
    """An HTTP server on 127.0.0.1: `respond(server, record)` gives (status, headers, body) for
    each request; `seen` holds a record per request: method, path, `authorization` (a
    fingerprint, or None when the header was not sent), `token` (the fingerprint of the token
    alone), `dpop` (the proof), and the other headers (lower-case names)."""

    def __init__(self, respond):
        self.respond = respond
        self.seen = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {name.lower(): value for name, value in self.headers.items()
                           if name.lower() not in ("authorization", "dpop")}
                authorization = self.headers.get("Authorization")
                record = dict(headers, method=self.command, path=self.path, body=body,
                              authorization=fingerprint(authorization),
                              token=fingerprint(authorization.split(" ", 1)[-1]) if authorization else None,
                              scheme=authorization.split(" ", 1)[0] if authorization else None,
                              raw_token=authorization.split(" ", 1)[-1] if authorization else None,
                              dpop=self.headers.get("DPoP"))
                with outer.lock:
                    outer.seen.append(record)
                    status, answer_headers, answer = outer.respond(outer, record)
                record.pop("raw_token")
                self.send_response(status)
                for name, value in answer_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = handle_one

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _b64decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def check_proof(proof, method, url, token, seen_jtis):
    """None when `proof` is a valid ES256 DPoP proof (RFC 9449 §4.3) of this request for
    `token`, else why not."""
    try:
        header_part, payload_part, signature_part = proof.split(".")
        header, payload = json.loads(_b64decode(header_part)), json.loads(_b64decode(payload_part))
        jwk = header["jwk"]
        if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256" or jwk.get("crv") != "P-256":
            return "header"
        key = ec.EllipticCurvePublicNumbers(int.from_bytes(_b64decode(jwk["x"]), "big"),
                                            int.from_bytes(_b64decode(jwk["y"]), "big"), ec.SECP256R1()).public_key()
        signature = _b64decode(signature_part)
        key.verify(encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")),
                   f"{header_part}.{payload_part}".encode(), ec.ECDSA(hashes.SHA256()))
    except (ValueError, KeyError, InvalidSignature):
        return "signature"
    ath = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()
    if payload.get("htm") != method or payload.get("htu") != url.split("?")[0] or payload.get("ath") != ath:
        return "claims"
    if abs(time.time() - payload.get("iat", 0)) > 60 or payload.get("jti") in seen_jtis:
        return "replay"
    seen_jtis.add(payload.get("jti"))
    return None


class DPoPResource(Loopback):
    """A resource that wants DPoP: each request's proof is verified; a proof without the
    current nonce gets 401 use_dpop_nonce with a DPoP-Nonce; the first token it sees, and any
    in `stale`, get 401 invalid_token; the rest 200. Counts `challenges` and `bad_proofs`."""

    def __init__(self, refuse_first=True):
        self.nonce = "nonce-1"
        self.stale = set()
        self.refuse_first = refuse_first
        self.challenges = 0
        self.bad_proofs = []
        self.jtis = set()
        super().__init__(DPoPResource._answer)

    def _answer(self, record):
        if record["scheme"] != "DPoP" or not record["dpop"]:
            return 401, {"WWW-Authenticate": 'DPoP error="invalid_token"'}, b"no DPoP token"
        problem = check_proof(record["dpop"], record["method"], self.url + record["path"], record["raw_token"], self.jtis)
        if problem:
            self.bad_proofs.append(problem)
            return 401, {"WWW-Authenticate": 'DPoP error="invalid_dpop_proof"'}, b"bad proof"
        nonce = json.loads(_b64decode(record["dpop"].split(".")[1])).get("nonce")
        if nonce != self.nonce:
            self.challenges += 1
            return 401, {"WWW-Authenticate": 'DPoP error="use_dpop_nonce", error_description="a nonce, please"',
                         "DPoP-Nonce": self.nonce}, b"nonce"
        if self.refuse_first and not self.stale:
            self.stale.add(record["token"])
        if record["token"] in self.stale:
            return 401, {"WWW-Authenticate": 'DPoP error="invalid_token"'}, b"stale"
        return 200, {"Content-Type": "application/json"}, b'{"ok": true}'


class CountingClient(Client):
    """A Client that keeps the name of each method it called."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.methods = []

    def call(self, method, params=None):
        self.methods.append(method)
        return super().call(method, params)


class CountingAsyncClient(AsyncClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.methods = []

    async def call(self, method, params=None):
        self.methods.append(method)
        return await super().call(method, params)


class Driver:
    """One HTTP library with its auth class for `provider`: `get(urls)` sends a GET to each URL
    in turn through the same auth object and returns the responses; `methods` are the RPC
    calls the auth object made."""

    def __init__(self, library, socket_path, provider, verify=True, **auth_options):
        self.library = library
        self.verify = verify
        if library == "httpx-async":
            self.client = CountingAsyncClient(socket_path)
            self.auth = AsyncHTTPXAuth(provider, client=self.client, **auth_options)
        else:
            self.client = CountingClient(socket_path)
            auth_class = AuthGateAuth if library == "requests" else HTTPXAuth
            self.auth = auth_class(provider, client=self.client, **auth_options)

    @property
    def methods(self):
        return self.client.methods

    def get(self, *urls):
        verify = self.verify
        if isinstance(verify, str) and self.library != "requests":
            verify = ssl.create_default_context(cafile=verify)
        if self.library == "requests":
            with requests.Session() as session:
                return [session.get(url, auth=self.auth, verify=self.verify, timeout=30) for url in urls]
        if self.library == "httpx":
            with httpx.Client(follow_redirects=True, verify=verify, timeout=30) as client:
                return [client.get(url, auth=self.auth) for url in urls]

        async def run():
            async with httpx.AsyncClient(follow_redirects=True, verify=verify, timeout=30) as client:
                return [await client.get(url, auth=self.auth) for url in urls]
        return asyncio.run(run())

    def get_at_once(self, *urls):
        """`get`, the requests all at once: threads for requests and httpx, tasks on one loop
        for httpx on asyncio."""
        if self.library == "requests":
            with concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
                return list(pool.map(lambda url: requests.get(url, auth=self.auth, timeout=30), urls))
        if self.library == "httpx":
            with httpx.Client(timeout=30) as client, concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
                return list(pool.map(lambda url: client.get(url, auth=self.auth), urls))

        async def run():
            async with httpx.AsyncClient(timeout=30) as client:
                return await asyncio.gather(*[client.get(url, auth=self.auth) for url in urls])
        return asyncio.run(run())
