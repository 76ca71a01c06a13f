"""The blocking client, the typed token, and what the asyncio client shares with it: how a
call is written and how an answer is read."""

from __future__ import annotations

import itertools
import json
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Iterator, Optional, Tuple, Union

from ._errors import ERRORS, AuthGateError, DaemonUnreachable, ProtocolError

#: The longest answer read (a `status` of many sessions is long; nothing else is).
MAXIMUM_ANSWER = 64 * 1024 * 1024

#: What `scope=` takes: OAuth's space-separated string, or the scopes one by one.
Scope = Union[str, Iterable[str]]


def default_socket(environ: Optional[dict] = None) -> str:
    """Where the CLI finds the daemon: $AUTHGATE_SOCKET, the per-user socket, the system one."""
    environ = os.environ if environ is None else environ
    if environ.get("AUTHGATE_SOCKET"):
        return environ["AUTHGATE_SOCKET"]
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        user = os.path.join(runtime, "authgate", "authgate.sock")
    else:
        state = environ.get("XDG_STATE_HOME", "")
        base = os.path.join(state, "authgate") if state.startswith("/") else os.path.expanduser("~/.local/state/authgate")
        user = os.path.join(base, "authgate.sock")
    return user if os.path.exists(user) else "/run/authgate/authgate.sock"


def parse_time(text: str) -> datetime:
    """An RFC 3339 date of the daemon's (UTC, `Z`) as an aware datetime, on Python 3.8 too."""
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    if "." in value:  # fromisoformat before 3.11 takes 3 or 6 digits of fractions only
        head, rest = value.split(".", 1)
        digits = len(rest) - len(rest.lstrip("0123456789"))
        value = f"{head}.{rest[:digits][:6].ljust(6, '0')}{rest[digits:]}"
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Token:
    """A token from authgated: `token` (the access token), `token_type` (``"Bearer"`` or
    ``"DPoP"``), `expires_at` (an aware UTC datetime), `scopes`. Neither its repr nor its
    str shows the token, so logging one leaks nothing: use `token`, or `authorization` for
    the header's value."""

    token: str = field(repr=False)
    token_type: str
    expires_at: datetime
    scopes: Tuple[str, ...] = ()
    id_token: Optional[str] = field(default=None, repr=False)
    #: RFC 8693: set for a token from `token.exchange` only.
    issued_token_type: Optional[str] = None

    @classmethod
    def from_result(cls, result: dict) -> "Token":
        """A `token` (or `token.rejected`, `token.exchange`) result as a Token."""
        try:
            return cls(token=result["access_token"], token_type=result.get("token_type") or "Bearer",
                       expires_at=parse_time(result["expires_at"]), scopes=tuple(result.get("scopes") or ()),
                       id_token=result.get("id_token"), issued_token_type=result.get("issued_token_type"))
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("authgated's token result is malformed") from None

    @property
    def access_token(self) -> str:
        """The same as `token`."""
        return self.token

    @property
    def authorization(self) -> str:
        """The `Authorization` header's value: ``"Bearer TOKEN"`` or ``"DPoP TOKEN"``."""
        return f"{self.token_type} {self.token}"

    def expires_in(self, now: Optional[datetime] = None) -> timedelta:
        """How long it stays valid (negative once expired)."""
        return self.expires_at - (now or datetime.now(timezone.utc))


def scopes_param(scope: Optional[Scope]) -> Optional[list]:
    """`scope=` as the RPC's `scopes`: a string is split on spaces."""
    if scope is None:
        return None
    if isinstance(scope, str):
        return scope.split()
    return [str(item) for item in scope]


def token_params(provider: str, session: Optional[str], min_valid: Optional[int], scope: Optional[Scope] = None,
                 resource: Optional[str] = None, force_refresh: bool = False) -> dict:
    """The params of a `token` call (None values are left out when it is sent)."""
    return {"provider": provider, "session": session, "min_valid_seconds": min_valid, "scopes": scopes_param(scope),
            "resource": resource, "force_refresh": True if force_refresh else None}


def encode_request(request_id: int, method: str, params: Optional[dict]) -> bytes:
    request = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        request["params"] = {key: value for key, value in params.items() if value is not None}
    return json.dumps(request, separators=(",", ":")).encode() + b"\n"


def decode_answer(line: Optional[bytes], request_id: int) -> Any:
    """The result of the answer `line` to call `request_id`, or the error class of its reason."""
    if not line:
        raise ProtocolError("authgated closed the connection without an answer")
    try:
        answer = json.loads(line)
    except ValueError:
        raise ProtocolError("authgated's answer is not JSON") from None
    if not isinstance(answer, dict) or answer.get("id") != request_id:
        raise ProtocolError("authgated's answer does not match the call")
    if "error" in answer:
        error = answer["error"] if isinstance(answer["error"], dict) else {}
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        reason = data.get("reason", "internal_error")
        message = data.get("message") or error.get("message", "authgated refused the call")
        raise ERRORS.get(reason, AuthGateError)(message, reason=reason, retry_after_seconds=data.get("retry_after_seconds"))
    return answer.get("result")


def decode_notification(line: bytes) -> Optional[dict]:
    """A `token.watch` notification as the event `watch` yields, or None for anything else."""
    try:
        message = json.loads(line)
    except ValueError:
        raise ProtocolError("authgated sent a line that is not JSON") from None
    params = message.get("params") if isinstance(message, dict) else None
    if not isinstance(params, dict):
        return None
    if message.get("method") == "token.changed":
        return {"event": "token", **{key: value for key, value in params.items() if key not in ("provider", "session")}}
    if message.get("method") == "session.ended":
        return {"event": "ended", "reason": params.get("reason"), "message": params.get("message")}
    return None


class Client:
    """authgated's RPC for one program; each call uses a connection of its own, so one Client
    may serve any number of threads."""

    #: The longest answer read (a `status` of many sessions is long; nothing else is).
    MAXIMUM_ANSWER = MAXIMUM_ANSWER

    def __init__(self, socket_path: Optional[str] = None, timeout: float = 30.0):
        self.socket_path = socket_path or default_socket()
        self.timeout = timeout
        self._ids = itertools.count(1)

    def call(self, method: str, params: Optional[dict] = None) -> Any:
        """One JSON-RPC call; returns its result or raises the error class of its reason."""
        request_id, connection = self._send(method, params, self.timeout)
        with connection:
            lines = _lines(connection)
            return decode_answer(next(lines, None), request_id)

    def token(self, provider: str, *, session: Optional[str] = None, min_valid: Optional[int] = None,
              scope: Optional[Scope] = None, resource: Optional[str] = None, force_refresh: bool = False) -> Token:
        """A token valid for at least `min_valid` seconds (the daemon's default: 10), as a
        `Token`. With `scope` (a space-separated string or a list) or `resource`, a narrower
        token, which the daemon caches per combination; `force_refresh` refreshes first."""
        return Token.from_result(self.call("token", token_params(provider, session, min_valid, scope, resource, force_refresh)))

    def token_result(self, provider: str, session: Optional[str] = None, min_valid: Optional[int] = None,
                     force_refresh: bool = False, *, scope: Optional[Scope] = None, resource: Optional[str] = None) -> dict:
        """The `token` result as the daemon sends it: a dict with access_token, token_type,
        expires_at (a string), scopes."""
        return self.call("token", token_params(provider, session, min_valid, scope, resource, force_refresh))

    def token_rejected(self, provider: str, access_token: str, session: Optional[str] = None) -> Token:
        """The API refused `access_token`: a new token if it was still the current one (the
        session is refreshed once for everyone), else the current one."""
        return Token.from_result(self.call("token.rejected", {"provider": provider, "session": session,
                                                              "access_token": access_token}))

    def watch(self, provider: str, session: Optional[str] = None, min_valid: Optional[int] = None, *,
              wait_for_sign_in: bool = False) -> Iterator[dict]:
        """The session's token now, then each new one as the daemon refreshes it (RPC
        `token.watch`): a generator of events, each a dict with `event` set to

        - ``"token"``: the `token` result (access_token, token_type, expires_at, scopes), at
          once and on every change (refresh, new sign-in);
        - ``"ended"``: the session ended (`reason` ``logged_out`` or ``login_required``,
          `message`); the watch goes on, and a new sign-in is a ``"token"`` again.

        It blocks between events (no timeout: the daemon keeps a watching connection open) and
        ends when the daemon closes the connection (a restart; `AsyncClient.watch` reconnects
        instead); closing the generator closes the connection. A refused watch raises the
        error class of its reason. With `wait_for_sign_in`, a session that does not exist yet is
        waited for instead of raising `LoginRequired`: the first event is its sign-in's token.
        """
        request_id, connection = self._send("token.watch", {"provider": provider, "session": session,
                                                            "min_valid_seconds": min_valid,
                                                            "wait_for_sign_in": wait_for_sign_in or None}, self.timeout)
        with connection:
            if wait_for_sign_in:
                connection.settimeout(None)
            lines = _lines(connection)
            first = decode_answer(next(lines, None), request_id)
            connection.settimeout(None)
            yield {"event": "token", **first}
            for line in lines:
                event = decode_notification(line)
                if event is not None:
                    yield event

    def _send(self, method: str, params: Optional[dict], timeout: float):
        request_id = next(self._ids)
        try:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.settimeout(timeout)
            connection.connect(self.socket_path)
        except OSError as error:
            raise DaemonUnreachable(f"cannot reach authgated at {self.socket_path}: {error.strerror or error}") from None
        connection.sendall(encode_request(request_id, method, params))
        return request_id, connection

    def authorization_headers(self, provider: str, method: str, url: str, session: Optional[str] = None,
                              nonce: Optional[str] = None, min_valid: Optional[int] = None, *,
                              scope: Optional[Scope] = None, resource: Optional[str] = None) -> dict:
        """The headers that authorize one request: `Authorization` with the token and, for a
        DPoP session (RFC 9449), a `DPoP` proof for this method and URL, signed by the daemon
        with the session's key, which this program never sees."""
        result = self.token_result(provider, session, min_valid, scope=scope, resource=resource)
        headers = {"Authorization": f"{result['token_type']} {result['access_token']}"}
        if result["token_type"] == "DPoP":
            headers["DPoP"] = self.dpop_proof(provider, method, url, session=session, nonce=nonce,
                                              access_token=result["access_token"])
        return headers

    def dpop_proof(self, provider: str, method: str, url: str, session: Optional[str] = None,
                   nonce: Optional[str] = None, access_token: Optional[str] = None) -> str:
        """A DPoP proof for one request (`dpop.proof`), for the session's current token or
        `access_token` when it is one of the session's; `nonce` is the server's `DPoP-Nonce`."""
        return self.call("dpop.proof", {"provider": provider, "session": session, "htm": method.upper(), "htu": url,
                                        "nonce": nonce, "access_token": access_token})["proof"]

    def exchange(self, provider: str, session: Optional[str] = None, audience: Optional[str] = None,
                 resource: Optional[str] = None, scopes: Optional[list] = None,
                 requested_token_type: Optional[str] = None) -> dict:
        """A token exchanged for the session's (RFC 8693 `token.exchange`): the whole result,
        with issued_token_type; cached by the daemon per combination (`Token.from_result`
        makes it a Token)."""
        return self.call("token.exchange", {"provider": provider, "session": session, "audience": audience,
                                            "resource": resource, "scopes": scopes,
                                            "requested_token_type": requested_token_type})

    def providers(self) -> list:
        """The providers the caller may use, with their status and sign-in methods."""
        return self.call("providers.list")

    def status(self, provider: Optional[str] = None) -> list:
        """The caller's sessions (never a token)."""
        return self.call("status", {"provider": provider})

    def info(self) -> dict:
        """`daemon.info`: the daemon's version, uptime, mode and counts."""
        return self.call("daemon.info")


def _lines(connection: socket.socket) -> Iterator[bytes]:
    """The connection's lines, each at most MAXIMUM_ANSWER bytes, until it closes."""
    buffer = b""
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line
        chunk = connection.recv(65536)
        if not chunk:
            return
        buffer += chunk
        if len(buffer) > MAXIMUM_ANSWER:
            raise ProtocolError("authgated's answer is too long")
