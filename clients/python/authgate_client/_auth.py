"""The retry policy every auth class shares (requests' and httpx's), written once as a
generator that asks for RPC calls and HTTP sends, and the drivers that run it blocking or on
asyncio.

The rule: a request gets the session's token (and, for a DPoP session, a proof of this
request with the nonce last heard from its origin). Its answer is looked at only when it came
from the very origin (scheme, host, port, default ports normalised) the token was sent to and
from the request that carried the Authorization header set here: a 401 after a redirect to
another origin — where the HTTP library dropped the header — or for a request without that
header is handed back as it is, with no daemon call and no retry. On a 401 with
`WWW-Authenticate: DPoP error="use_dpop_nonce"` and a `DPoP-Nonce` the request is sent once
more with a proof carrying the nonce, which is remembered for the origin (RFC 9449 §9). On any
other 401 the daemon hears once per token that the API refused it (`token.rejected`) and the
request is sent once more with the token it answers; a token the API refused even then is
remembered, and not reported again: an API that refuses everything costs one refresh per
token, not one per request, and never a loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
from collections import OrderedDict
from typing import Any, Generator, Optional, Tuple
from urllib.parse import urlsplit

from ._client import Client, Scope, scopes_param

_DEFAULT_PORTS = {"http": 80, "https": 443}
_USE_DPOP_NONCE = re.compile(r'(?:^|[\s,])error\s*=\s*"?use_dpop_nonce"?(?:$|[\s,;])', re.IGNORECASE)
_DPOP_SCHEME = re.compile(r"(?:^|[\s,])DPoP(?:$|\s)", re.IGNORECASE)


def origin(url: str) -> Tuple[str, str, Optional[int]]:
    """(scheme, host, port) of `url`, lower-cased, the scheme's default port filled in."""
    parts = urlsplit(str(url))
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port if port is not None else _DEFAULT_PORTS.get(scheme)


def asks_for_nonce(challenge: Optional[str]) -> bool:
    """Whether a WWW-Authenticate header is DPoP's `error="use_dpop_nonce"`."""
    return bool(challenge) and bool(_DPOP_SCHEME.search(challenge)) and bool(_USE_DPOP_NONCE.search(challenge))


def _digest(token: str) -> bytes:
    """What the policy remembers of a token: not the token."""
    return hashlib.sha256(token.encode()).digest()


class _Bounded(OrderedDict):
    """A dict that forgets its oldest entries past `size`."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


# What the flow asks its driver for.
class Call:
    __slots__ = ("method", "params")

    def __init__(self, method: str, params: dict):
        self.method, self.params = method, params


class Send:
    __slots__ = ("request",)

    def __init__(self, request: Any):
        self.request = request


class Replace:
    """The API refused this token result: the driver runs `Policy.replacement` for it, one at
    a time per policy."""
    __slots__ = ("result",)

    def __init__(self, result: dict):
        self.result = result


_REPORTED = object()  # the daemon heard that the API refused this token
_REFUSED = object()   # refused even as the fresh token: no retry for it


class Policy:
    """One auth object's state: the nonce of each origin, and what became of refused tokens."""

    #: Origins whose DPoP nonce is kept, and refused tokens remembered.
    REMEMBERED = 256

    def __init__(self, provider: str, session: Optional[str], min_valid: Optional[int], scope: Optional[Scope],
                 resource: Optional[str]):
        self.provider = provider
        self.session = session
        self.min_valid = min_valid
        self.scopes = scopes_param(scope)
        self.resource = resource
        self.nonces = _Bounded(self.REMEMBERED)
        # digest of a token the API refused → _REPORTED or _REFUSED.
        self.verdicts = _Bounded(self.REMEMBERED)
        self.state_lock = threading.Lock()     # the two dicts, held briefly
        self.replace_lock = threading.Lock()   # one replacement at a time (blocking drivers)
        self.pending: dict = {}                # digest → asyncio.Future: a replacement under way (asyncio)

    def _token_params(self, force_refresh: bool = False) -> dict:
        return {"provider": self.provider, "session": self.session, "min_valid_seconds": self.min_valid,
                "scopes": self.scopes, "resource": self.resource, "force_refresh": True if force_refresh else None}

    def flow(self, request: Any, http: "HTTP") -> Generator[Any, Any, Any]:
        """One request's flow: yields Call, Send and Replace; returns the response to hand
        back."""
        authorised = origin(http.url(request))
        result = yield Call("token", self._token_params())
        nonce_retried = token_retried = False
        while True:
            token, token_type = result["access_token"], result.get("token_type") or "Bearer"
            authorization = f"{token_type} {token}"
            dpop = token_type.lower() == "dpop"
            http.set_header(request, "Authorization", authorization)
            if dpop:
                with self.state_lock:
                    nonce = self.nonces.get(authorised)
                proof = yield Call("dpop.proof", {"provider": self.provider, "session": self.session,
                                                  "htm": http.method(request).upper(), "htu": http.url(request),
                                                  "nonce": nonce, "access_token": token})
                http.set_header(request, "DPoP", proof["proof"])
            response = yield Send(request)
            sent = http.sent(response)
            if origin(http.url(sent)) != authorised or http.header(sent, "Authorization") != authorization:
                return response  # not this origin's answer to this token: nothing to learn, nothing to retry
            fresh_nonce = http.header(response, "DPoP-Nonce") if dpop else None
            if fresh_nonce:
                with self.state_lock:
                    self.nonces[authorised] = fresh_nonce
            if http.status(response) != 401:
                return response
            if fresh_nonce and asks_for_nonce(http.header(response, "WWW-Authenticate")):
                if nonce_retried:
                    return response  # a nonce once per request: the token was not what it refused
                nonce_retried = True
                request = http.retry(request, response)
                continue
            if token_retried:
                with self.state_lock:
                    self.verdicts[_digest(token)] = _REFUSED
                return response
            replacement = yield Replace(result)
            if replacement is None:
                return response
            token_retried = True
            result = replacement
            request = http.retry(request, response)

    def replacement(self, result: dict) -> Generator[Call, Any, Optional[dict]]:
        """The token to retry with after the API refused `result`'s, or None. The daemon hears
        of a token once (`token.rejected`; for a token with scopes or a resource, which
        token.rejected does not take, the current one of those is asked for, and refreshed
        when it is still the refused one); a later 401 to the same token takes the current
        token without telling the daemon again, and a token refused even as the fresh one
        gets no retry."""
        token = result["access_token"]
        key = _digest(token)
        with self.state_lock:
            verdict = self.verdicts.get(key)
        if verdict is _REFUSED:
            return None
        if verdict is _REPORTED:
            current = yield Call("token", self._token_params())
        elif self.scopes is None and self.resource is None:
            current = yield Call("token.rejected", {"provider": self.provider, "session": self.session,
                                                    "access_token": token})
        else:
            current = yield Call("token", self._token_params())
            if current["access_token"] == token:
                current = yield Call("token", self._token_params(force_refresh=True))
        with self.state_lock:
            if verdict is None:
                self.verdicts[key] = _REPORTED
            if current["access_token"] == token or self.verdicts.get(_digest(current["access_token"])) is _REFUSED:
                return None
        return current


class HTTP:
    """How the flow reads and writes one HTTP library's requests and responses."""

    @staticmethod
    def url(request) -> str:
        return str(request.url)

    @staticmethod
    def method(request) -> str:
        return request.method

    @staticmethod
    def set_header(request, name: str, value: str) -> None:
        request.headers[name] = value

    @staticmethod
    def sent(response):
        """The request that got `response` (after any redirects)."""
        return response.request

    @staticmethod
    def header(message, name: str) -> Optional[str]:
        return message.headers.get(name)

    @staticmethod
    def status(response) -> int:
        return response.status_code

    @staticmethod
    def retry(request, response):
        """The request to send again."""
        return request


def advance(policy: Policy, client: Client, flow: Generator, value: Any) -> Tuple[Any, Any]:
    """Runs `flow` with blocking calls up to its next send: (request, None), or (None, the
    response it hands back) when it is done."""
    while True:
        try:
            action = flow.send(value)
        except StopIteration as done:
            return None, done.value
        if isinstance(action, Send):
            return action.request, None
        if isinstance(action, Call):
            value = client.call(action.method, action.params)
        else:
            with policy.replace_lock:
                value = _run_calls(client, policy.replacement(action.result))


def _run_calls(client: Client, flow: Generator) -> Any:
    value = None
    while True:
        try:
            call = flow.send(value)
        except StopIteration as done:
            return done.value
        value = client.call(call.method, call.params)


async def advance_async(policy: Policy, client, flow: Generator, value: Any) -> Tuple[Any, Any]:
    """`advance` on asyncio, with an AsyncClient."""
    while True:
        try:
            action = flow.send(value)
        except StopIteration as done:
            return None, done.value
        if isinstance(action, Send):
            return action.request, None
        if isinstance(action, Call):
            value = await client.call(action.method, action.params)
        else:
            value = await _replace_async(policy, client, action.result)


async def _replace_async(policy: Policy, client, result: dict) -> Optional[dict]:
    """`Policy.replacement` one at a time per token on this event loop: a task whose token is
    being reported waits for that report and takes its answer."""
    key = _digest(result["access_token"])
    loop = asyncio.get_running_loop()
    while True:
        waiting = policy.pending.get(key)
        if waiting is None or waiting.get_loop() is not loop:
            break
        await asyncio.shield(waiting)
    done = loop.create_future()
    policy.pending[key] = done
    try:
        flow = policy.replacement(result)
        value = None
        while True:
            try:
                call = flow.send(value)
            except StopIteration as finished:
                return finished.value
            value = await client.call(call.method, call.params)
    finally:
        if policy.pending.get(key) is done:
            del policy.pending[key]
        done.set_result(None)


class _RequestsHTTP(HTTP):
    @staticmethod
    def retry(request, response):
        # The request that got the 401 (after a redirect within the origin, the redirected
        # one), copied: requests sends it again through the same connection adapter.
        return response.request.copy()


class Authorization:
    """What every auth class keeps: the session it authorises requests for, the daemon's client
    (`client_class()` when none is given) and the retry policy they share."""

    client_class: type = Client

    def __init__(self, provider: str, session: Optional[str] = None, client: Any = None,
                 min_valid: int = 30, *, scope: Optional[Scope] = None, resource: Optional[str] = None):
        self.provider = provider
        self.session = session
        self.client = client or self.client_class()
        self.min_valid = min_valid
        self._policy = Policy(provider, session, min_valid, scope, resource)


class AuthGateAuth(Authorization):
    """`requests` authentication: adds `Authorization: Bearer TOKEN` (for a DPoP session
    `Authorization: DPoP TOKEN` and a `DPoP` proof of this request, with the origin's nonce).
    A 401 from the origin it authorised, to the token it sent, is retried once with a proof
    carrying the server's `DPoP-Nonce` when the server asks for one, and once with the token
    `token.rejected` answers (reported once per token) otherwise; a 401 from anywhere else (a
    redirect to another host) comes back as it is. With `scope` or `resource`, a narrower
    token (`Client.token`'s)."""

    def __call__(self, request):
        flow = self._policy.flow(request, _RequestsHTTP)
        advance(self._policy, self.client, flow, None)  # up to the send, which requests does
        finished = []

        def on_response(response, **kwargs):
            if finished or response.is_redirect:
                # Redirects are followed by requests; the flow sees where they lead.
                return response
            previous = response
            while True:
                again, final = advance(self._policy, self.client, flow, previous)
                if again is None:
                    finished.append(True)
                    return final
                previous.content  # read the body so the connection can be reused
                previous.close()
                answer = previous.connection.send(again, **kwargs)
                answer.history = list(previous.history) + [previous]
                answer.request = again
                previous = answer

        request.register_hook("response", on_response)
        return request
