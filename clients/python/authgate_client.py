"""A client of authgated for Python programs: no socket code, no dependencies.

    from authgate_client import Client, AuthGateAuth, LoginRequired

    token = Client().token("corp")                         # a valid access token
    requests.get(url, auth=AuthGateAuth("corp"))           # the header, and one retry on 401
    for event in Client().watch("corp"):                   # the token now, then each new one
        ...

Each call is one JSON-RPC 2.0 request on authgated's Unix socket (found as the CLI finds it:
$AUTHGATE_SOCKET, else the per-user daemon's, else /run/authgate/authgate.sock). A refused
call raises the exception class of its stable reason (LoginRequired for "login_required", …),
all subclasses of AuthGateError, which carries `reason`, `message` and `retry_after_seconds`.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
from typing import Any, Iterator, Optional

__all__ = [
    "Client", "AuthGateAuth", "AuthGateError", "DaemonUnreachable", "ProtocolError", "ERRORS",
    "LoginRequired", "InvalidCredentials", "UnknownProvider", "ProviderUnavailable", "UnsupportedGrant",
    "PermissionDenied", "RateLimited", "NetworkError", "ServiceUnavailable", "ServerError", "ValidationFailed",
    "InvalidParams", "InternalError",
]


class AuthGateError(Exception):
    """A call authgated refused: `reason` is its stable reason code."""

    reason = "internal_error"

    def __init__(self, message: str, reason: Optional[str] = None, retry_after_seconds: Optional[int] = None):
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        self.retry_after_seconds = retry_after_seconds

    def __str__(self) -> str:
        return f"{self.message} [{self.reason}]"


class DaemonUnreachable(AuthGateError):
    """Nothing answers on the socket (no daemon, or no permission)."""
    reason = "daemon_unreachable"


class ProtocolError(AuthGateError):
    """authgated answered something that is not a response to the call."""
    reason = "protocol_error"


def _error(name: str, code: str, doc: str) -> type:
    return type(name, (AuthGateError,), {"reason": code, "__doc__": doc})


LoginRequired = _error("LoginRequired", "login_required", "There is no usable session: sign in (authgate login PROVIDER).")
InvalidCredentials = _error("InvalidCredentials", "invalid_credentials", "The username or password is incorrect.")
UnknownProvider = _error("UnknownProvider", "unknown_provider", "No such provider, or not one the caller may use.")
ProviderUnavailable = _error("ProviderUnavailable", "provider_unavailable", "The provider's configuration cannot be used.")
UnsupportedGrant = _error("UnsupportedGrant", "unsupported_grant", "The provider does not allow that.")
PermissionDenied = _error("PermissionDenied", "permission_denied", "Not allowed.")
RateLimited = _error("RateLimited", "rate_limited", "Too many at once; retry after retry_after_seconds.")
NetworkError = _error("NetworkError", "network_error", "The provider cannot be reached.")
ServiceUnavailable = _error("ServiceUnavailable", "service_unavailable", "The provider is failing or overloaded.")
ServerError = _error("ServerError", "server_error", "The provider answered something wrong.")
ValidationFailed = _error("ValidationFailed", "validation_failed", "The input was refused.")
InvalidParams = _error("InvalidParams", "invalid_params", "The call's parameters were refused.")
InternalError = _error("InternalError", "internal_error", "authgated failed.")
DPoPRejected = _error("DPoPRejected", "dpop_rejected", "The provider refused the DPoP proof of the session's key.")

#: Exception class by reason code; reasons not listed raise AuthGateError with that reason.
ERRORS = {cls.reason: cls for cls in (LoginRequired, InvalidCredentials, UnknownProvider, ProviderUnavailable,
                                      UnsupportedGrant, PermissionDenied, RateLimited, NetworkError, ServiceUnavailable,
                                      ServerError, ValidationFailed, InvalidParams, InternalError, DPoPRejected)}


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


class Client:
    """authgated's RPC for one program; each call uses a connection of its own."""

    #: The longest answer read (a `status` of many sessions is long; nothing else is).
    MAXIMUM_ANSWER = 64 * 1024 * 1024

    def __init__(self, socket_path: Optional[str] = None, timeout: float = 30.0):
        self.socket_path = socket_path or default_socket()
        self.timeout = timeout
        self._ids = itertools.count(1)

    def call(self, method: str, params: Optional[dict] = None) -> Any:
        """One JSON-RPC call; returns its result or raises the error class of its reason."""
        request_id, connection = self._send(method, params, self.timeout)
        with connection:
            lines = _lines(connection)
            return self._result(next(lines, None), request_id)

    def watch(self, provider: str, session: Optional[str] = None, min_valid: Optional[int] = None) -> Iterator[dict]:
        """The session's token now, then each new one as the daemon refreshes it (RPC
        `token.watch`): a generator of events, each a dict with `event` set to

        - ``"token"``: the `token` result (access_token, token_type, expires_at, scopes), at
          once and on every change (refresh, new sign-in);
        - ``"ended"``: the session ended (`reason` ``logged_out`` or ``login_required``,
          `message`); the watch goes on, and a new sign-in is a ``"token"`` again.

        It blocks between events (no timeout: the daemon keeps a watching connection open) and
        ends when the daemon closes the connection (a restart); closing the generator closes
        the connection. A refused watch raises the error class of its reason.
        """
        request_id, connection = self._send("token.watch", {"provider": provider, "session": session, "min_valid_seconds": min_valid},
                                            self.timeout)
        with connection:
            lines = _lines(connection)
            first = self._result(next(lines, None), request_id)
            connection.settimeout(None)
            yield {"event": "token", **first}
            for line in lines:
                try:
                    message = json.loads(line)
                except ValueError:
                    raise ProtocolError("authgated sent a line that is not JSON") from None
                params = message.get("params") if isinstance(message, dict) else None
                if not isinstance(params, dict):
                    continue
                if message.get("method") == "token.changed":
                    yield {"event": "token", **{key: value for key, value in params.items() if key not in ("provider", "session")}}
                elif message.get("method") == "session.ended":
                    yield {"event": "ended", "reason": params.get("reason"), "message": params.get("message")}

    def _send(self, method: str, params: Optional[dict], timeout: float):
        request_id = next(self._ids)
        request = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            request["params"] = {key: value for key, value in params.items() if value is not None}
        try:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.settimeout(timeout)
            connection.connect(self.socket_path)
        except OSError as error:
            raise DaemonUnreachable(f"cannot reach authgated at {self.socket_path}: {error.strerror or error}") from None
        connection.sendall(json.dumps(request, separators=(",", ":")).encode() + b"\n")
        return request_id, connection

    @staticmethod
    def _result(line: Optional[bytes], request_id: int) -> Any:
        if line is None:
            raise ProtocolError("authgated closed the connection without an answer")
        try:
            answer = json.loads(line)
        except ValueError:
            raise ProtocolError("authgated's answer is not JSON") from None
        if not isinstance(answer, dict) or answer.get("id") != request_id:
            raise ProtocolError("authgated's answer does not match the call")
        if "error" in answer:
            data = (answer["error"] or {}).get("data") or {}
            reason = data.get("reason", "internal_error")
            message = data.get("message") or answer["error"].get("message", "authgated refused the call")
            raise ERRORS.get(reason, AuthGateError)(message, reason=reason, retry_after_seconds=data.get("retry_after_seconds"))
        return answer.get("result")

    def token_result(self, provider: str, session: Optional[str] = None, min_valid: Optional[int] = None,
                     force_refresh: bool = False) -> dict:
        """The whole `token` result: access_token, token_type, expires_at, scopes."""
        return self.call("token", {"provider": provider, "session": session, "min_valid_seconds": min_valid,
                                   "force_refresh": True if force_refresh else None})

    def token(self, provider: str, session: Optional[str] = None, min_valid: Optional[int] = None) -> str:
        """An access token valid for at least `min_valid` seconds (the daemon's default: 10)."""
        return self.token_result(provider, session, min_valid)["access_token"]

    def token_rejected(self, provider: str, access_token: str, session: Optional[str] = None) -> str:
        """The API refused `access_token`: a new token if it was still the current one (the
        session is refreshed once for everyone), else the current one."""
        return self.call("token.rejected", {"provider": provider, "session": session, "access_token": access_token})["access_token"]

    def authorization_headers(self, provider: str, method: str, url: str, session: Optional[str] = None,
                              nonce: Optional[str] = None, min_valid: Optional[int] = None) -> dict:
        """The headers that authorize one request: `Authorization` with the token and, for a
        DPoP session (RFC 9449), a `DPoP` proof for this method and URL, signed by the daemon
        with the session's key, which this program never sees."""
        result = self.token_result(provider, session, min_valid)
        headers = {"Authorization": f"{result['token_type']} {result['access_token']}"}
        if result["token_type"] == "DPoP":
            headers["DPoP"] = self.dpop_proof(provider, method, url, session=session, nonce=nonce,
                                              access_token=result["access_token"])
        return headers

    def dpop_proof(self, provider: str, method: str, url: str, session: Optional[str] = None,
                   nonce: Optional[str] = None, access_token: Optional[str] = None) -> str:
        """A DPoP proof for one request (`dpop.proof`), for the session's current token or
        `access_token` when it is one of the session's."""
        return self.call("dpop.proof", {"provider": provider, "session": session, "htm": method.upper(), "htu": url,
                                        "nonce": nonce, "access_token": access_token})["proof"]

    def exchange(self, provider: str, session: Optional[str] = None, audience: Optional[str] = None,
                 resource: Optional[str] = None, scopes: Optional[list] = None,
                 requested_token_type: Optional[str] = None) -> dict:
        """A token exchanged for the session's (RFC 8693 `token.exchange`): the whole result,
        with issued_token_type; cached by the daemon per combination."""
        return self.call("token.exchange", {"provider": provider, "session": session, "audience": audience,
                                            "resource": resource, "scopes": scopes,
                                            "requested_token_type": requested_token_type})

    def providers(self) -> list:
        """The providers the caller may use, with their status and sign-in methods."""
        return self.call("providers.list")

    def status(self, provider: Optional[str] = None) -> list:
        """The caller's sessions (never a token)."""
        return self.call("status", {"provider": provider})


def _lines(connection: socket.socket) -> Iterator[bytes]:
    """The connection's lines, each at most Client.MAXIMUM_ANSWER bytes, until it closes."""
    buffer = b""
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line
        chunk = connection.recv(65536)
        if not chunk:
            return
        buffer += chunk
        if len(buffer) > Client.MAXIMUM_ANSWER:
            raise ProtocolError("authgated's answer is too long")


class AuthGateAuth:
    """`requests` authentication: adds `Authorization: Bearer TOKEN` (for a DPoP session
    `Authorization: DPoP TOKEN` and a `DPoP` proof of this request); on a 401 it tells the
    daemon (`token.rejected`) and retries the request once with the new token."""

    def __init__(self, provider: str, session: Optional[str] = None, client: Optional[Client] = None, min_valid: int = 30):
        self.provider = provider
        self.session = session
        self.client = client or Client()
        self.min_valid = min_valid

    def __call__(self, request):
        result = self.client.token_result(self.provider, self.session, self.min_valid)
        self._authorize(request, result)
        request.register_hook("response", self._retry_on_401)
        return request

    def _authorize(self, request, result: dict) -> None:
        request.headers["Authorization"] = f"{result['token_type']} {result['access_token']}"
        if result["token_type"] == "DPoP":
            request.headers["DPoP"] = self.client.dpop_proof(self.provider, request.method, request.url,
                                                             session=self.session, access_token=result["access_token"])

    def _retry_on_401(self, response, **kwargs):
        if response.status_code != 401 or getattr(response.request, "_authgate_retried", False):
            return response
        sent = response.request.headers.get("Authorization", "")
        rejected = sent.split(" ", 1)[1] if " " in sent else ""
        token = self.client.token_rejected(self.provider, rejected, self.session)
        response.content  # read the body so the connection can be reused
        response.close()
        retry = response.request.copy()
        self._authorize(retry, {"token_type": sent.split(" ", 1)[0] or "Bearer", "access_token": token})
        retry._authgate_retried = True
        again = response.connection.send(retry, **kwargs)
        again.history.append(response)
        again.request = retry
        return again
