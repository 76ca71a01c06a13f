"""httpx authentication (`pip install httpx`; imported only when one of these classes is)."""

from __future__ import annotations

from typing import AsyncGenerator, Generator

import httpx

from ._aio import AsyncClient
from ._auth import HTTP, Authorization, advance, advance_async


class HTTPXAuth(Authorization, httpx.Auth):
    """`httpx.Client` authentication, with the retry policy of `AuthGateAuth`: the session's
    token (and a DPoP proof with the origin's nonce); on a 401 from the origin it authorised,
    to the token it sent, one retry with the server's `DPoP-Nonce` when asked for one, else
    `token.rejected` (once per token) and one retry. For `httpx.AsyncClient` use
    `AsyncHTTPXAuth`."""

    requires_request_body = True  # a retry sends the body again

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.read()
        flow = self._policy.flow(request, HTTP)
        send, _ = advance(self._policy, self.client, flow, None)
        while send is not None:
            response = yield send
            send, _ = advance(self._policy, self.client, flow, response)

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        raise TypeError("HTTPXAuth blocks on the daemon's socket: use AsyncHTTPXAuth with httpx.AsyncClient")
        yield request  # pragma: no cover  (makes this an async generator, as httpx expects)


class AsyncHTTPXAuth(Authorization, httpx.Auth):
    """`httpx.AsyncClient` authentication: `HTTPXAuth` with an `AsyncClient`, so the daemon's
    calls run on the event loop."""

    requires_request_body = True
    client_class = AsyncClient

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        await request.aread()
        flow = self._policy.flow(request, HTTP)
        send, _ = await advance_async(self._policy, self.client, flow, None)
        while send is not None:
            response = yield send
            send, _ = await advance_async(self._policy, self.client, flow, response)

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise TypeError("AsyncHTTPXAuth runs on asyncio: use HTTPXAuth with httpx.Client")
        yield request  # pragma: no cover
