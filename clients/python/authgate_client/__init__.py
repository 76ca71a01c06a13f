"""A client of authgated for Python programs: no socket code, no dependencies.

    from authgate_client import Client, AsyncClient, AuthGateAuth, HTTPXAuth, LoginRequired

    token = Client().token("corp")                         # a Token: .token, .token_type, .expires_at
    requests.get(url, auth=AuthGateAuth("corp"))           # the header, and the 401 retry policy
    httpx.get(url, auth=HTTPXAuth("corp"))                 # the same for httpx (AsyncHTTPXAuth on asyncio)
    token = await AsyncClient().token("corp")              # every method on asyncio
    for event in Client().watch("corp"):                   # the token now, then each new one
        ...

Each call is one JSON-RPC 2.0 request on authgated's Unix socket (found as the CLI finds it:
$AUTHGATE_SOCKET, else the per-user daemon's, else /run/authgate/authgate.sock). A refused
call raises the exception class of its stable reason (LoginRequired for "login_required", …),
all subclasses of AuthGateError, which carries `reason`, `message` and `retry_after_seconds`.

The auth classes share one retry policy (see `_auth`): only a 401 from the origin they
authorised, to the Authorization header they set, is retried — once with the server's DPoP
nonce when it asks for one, once with the token `token.rejected` answers otherwise (reported
once per token); never a refresh loop. httpx is imported only when HTTPXAuth or
AsyncHTTPXAuth is.
"""

from __future__ import annotations

from ._aio import AsyncClient
from ._auth import AuthGateAuth
from ._client import Client, Token, default_socket
from ._errors import (ERRORS, AuthGateError, ConsentDenied, DaemonUnreachable, DPoPRejected, InternalError, InvalidCredentials,
                      InvalidParams, LoginRequired, NetworkError, PermissionDenied, ProtocolError, ProviderUnavailable,
                      RateLimited, RegistrationRefused, ServerError, ServiceUnavailable, UnknownProvider,
                      UnsupportedGrant, ValidationFailed, WorkloadTokenInvalid)

#: The client's version: always the daemon's it was released with (`daemon.info`'s `version`).
__version__ = "0.1.0"

#: `AuthGateAuth` under the name of the library it is for.
RequestsAuth = AuthGateAuth

# HTTPXAuth and AsyncHTTPXAuth are left out, so that `import *` does not need httpx.
__all__ = [
    "Client", "AsyncClient", "Token", "AuthGateAuth", "RequestsAuth", "default_socket",
    "AuthGateError", "DaemonUnreachable", "ProtocolError", "ERRORS",
    "LoginRequired", "InvalidCredentials", "UnknownProvider", "ProviderUnavailable", "UnsupportedGrant",
    "PermissionDenied", "RateLimited", "NetworkError", "ServiceUnavailable", "ServerError", "ValidationFailed",
    "InvalidParams", "InternalError", "DPoPRejected", "RegistrationRefused", "WorkloadTokenInvalid", "ConsentDenied",
]

for _public in (Client, AsyncClient, Token, AuthGateAuth, AuthGateError, DaemonUnreachable, ProtocolError):
    _public.__module__ = __name__
del _public


def __getattr__(name: str):
    """HTTPXAuth and AsyncHTTPXAuth, importing httpx only for them."""
    if name in ("HTTPXAuth", "AsyncHTTPXAuth"):
        try:
            from . import _httpx
        except ImportError as error:
            raise ImportError(f"authgate_client.{name} needs httpx (pip install httpx): {error}") from error
        return getattr(_httpx, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
