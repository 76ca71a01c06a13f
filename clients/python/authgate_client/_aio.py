"""The asyncio client: the methods of `Client` as coroutines, on the event loop's own sockets
(no thread per call), and a `watch` that reconnects."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, AsyncIterator, Optional

from ._client import (MAXIMUM_ANSWER, Scope, Token, decode_answer, decode_notification, default_socket,
                      encode_request, token_params)
from ._errors import (DaemonUnreachable, LoginRequired, NetworkError, ProtocolError, RateLimited,
                      ServiceUnavailable)

#: What a reconnecting watch waits out (retrying, the delay doubling up to `max_delay`):
#: the daemon away or restarting, its answer cut off, a provider unwell, too many at once, no
#: session (yet) to watch.
_PASSING = (DaemonUnreachable, ProtocolError, RateLimited, NetworkError, ServiceUnavailable, LoginRequired)


class AsyncClient:
    """authgated's RPC for an asyncio program. Each call uses a connection of its own, at
    most `max_connections` at once per event loop (the others wait their turn), so one
    AsyncClient serves any number of tasks; the daemon lets a user hold 256 connections."""

    def __init__(self, socket_path: Optional[str] = None, timeout: float = 30.0, max_connections: int = 32):
        self.socket_path = socket_path or default_socket()
        self.timeout = timeout
        self.max_connections = max_connections
        self._ids = itertools.count(1)
        self._limits: dict = {}

    def _limit(self) -> asyncio.Semaphore:
        """This event loop's semaphore (a semaphore belongs to one loop before Python 3.10)."""
        loop = asyncio.get_running_loop()
        limit = self._limits.get(loop)
        if limit is None:
            for known in [known for known in self._limits if known.is_closed()]:
                del self._limits[known]
            limit = self._limits[loop] = asyncio.Semaphore(self.max_connections)
        return limit

    async def _connect(self):
        try:
            return await asyncio.open_unix_connection(self.socket_path, limit=MAXIMUM_ANSWER)
        except OSError as error:
            raise DaemonUnreachable(f"cannot reach authgated at {self.socket_path}: {error.strerror or error}") from None

    async def call(self, method: str, params: Optional[dict] = None) -> Any:
        """One JSON-RPC call; returns its result or raises the error class of its reason
        (asyncio.TimeoutError after `timeout` seconds)."""
        async with self._limit():
            return await asyncio.wait_for(self._call(method, params), self.timeout)

    async def _call(self, method: str, params: Optional[dict]) -> Any:
        request_id = next(self._ids)
        reader, writer = await self._connect()
        try:
            writer.write(encode_request(request_id, method, params))
            await writer.drain()
            return decode_answer(await _readline(reader), request_id)
        finally:
            writer.close()

    async def token(self, provider: str, *, session: Optional[str] = None, min_valid: Optional[int] = None,
                    scope: Optional[Scope] = None, resource: Optional[str] = None, force_refresh: bool = False) -> Token:
        """As `Client.token`: a `Token` valid for at least `min_valid` seconds."""
        return Token.from_result(await self.call("token", token_params(provider, session, min_valid, scope, resource,
                                                                       force_refresh)))

    async def token_result(self, provider: str, session: Optional[str] = None, min_valid: Optional[int] = None,
                           force_refresh: bool = False, *, scope: Optional[Scope] = None,
                           resource: Optional[str] = None) -> dict:
        """As `Client.token_result`: the `token` result as a dict."""
        return await self.call("token", token_params(provider, session, min_valid, scope, resource, force_refresh))

    async def token_rejected(self, provider: str, access_token: str, session: Optional[str] = None) -> Token:
        """As `Client.token_rejected`: the API refused `access_token`."""
        return Token.from_result(await self.call("token.rejected", {"provider": provider, "session": session,
                                                                    "access_token": access_token}))

    async def authorization_headers(self, provider: str, method: str, url: str, session: Optional[str] = None,
                                    nonce: Optional[str] = None, min_valid: Optional[int] = None, *,
                                    scope: Optional[Scope] = None, resource: Optional[str] = None) -> dict:
        """As `Client.authorization_headers`."""
        result = await self.token_result(provider, session, min_valid, scope=scope, resource=resource)
        headers = {"Authorization": f"{result['token_type']} {result['access_token']}"}
        if result["token_type"] == "DPoP":
            headers["DPoP"] = await self.dpop_proof(provider, method, url, session=session, nonce=nonce,
                                                    access_token=result["access_token"])
        return headers

    async def dpop_proof(self, provider: str, method: str, url: str, session: Optional[str] = None,
                         nonce: Optional[str] = None, access_token: Optional[str] = None) -> str:
        """As `Client.dpop_proof`."""
        return (await self.call("dpop.proof", {"provider": provider, "session": session, "htm": method.upper(),
                                               "htu": url, "nonce": nonce, "access_token": access_token}))["proof"]

    async def exchange(self, provider: str, session: Optional[str] = None, audience: Optional[str] = None,
                       resource: Optional[str] = None, scopes: Optional[list] = None,
                       requested_token_type: Optional[str] = None) -> dict:
        """As `Client.exchange`."""
        return await self.call("token.exchange", {"provider": provider, "session": session, "audience": audience,
                                                  "resource": resource, "scopes": scopes,
                                                  "requested_token_type": requested_token_type})

    async def providers(self) -> list:
        """As `Client.providers`."""
        return await self.call("providers.list")

    async def status(self, provider: Optional[str] = None) -> list:
        """As `Client.status`."""
        return await self.call("status", {"provider": provider})

    async def info(self) -> dict:
        """As `Client.info`: `daemon.info`."""
        return await self.call("daemon.info")

    async def watch(self, provider: str, session: Optional[str] = None, min_valid: Optional[int] = None, *,
                    reconnect: bool = True, max_delay: float = 5.0, wait_for_sign_in: bool = False) -> AsyncIterator[dict]:
        """The events of `Client.watch` (``"token"`` and ``"ended"`` dicts), as an async
        generator; it does not hold a call's connection slot.

        The first watch is as `Client.watch`: a refusal, or no daemon, raises. After that, with
        `reconnect` (the default), a connection the daemon closes (a restart) is opened again,
        retrying with a delay that doubles up to `max_delay` seconds while the daemon is away,
        rate-limits, or its provider is unwell. The token on the new connection is yielded only
        when it is not the last one yielded; a session that is gone by then is an ``"ended"``
        event (``login_required``) and the watch goes on retrying until there is one again.
        Refusals that do not pass (an unknown provider, a denied caller) raise. Without
        `reconnect` the generator ends with the connection. Close it with `aclose()` (or leave
        an `async for` early) to close the connection.

        With `wait_for_sign_in`, a session that does not exist yet is waited for (the first
        event is its sign-in's token) instead of raising `LoginRequired`. A reconnecting watch
        whose session is gone always waits so, after its ``"ended"`` event: a new sign-in is
        seen at once, not at the next retry.
        """
        params = {"provider": provider, "session": session, "min_valid_seconds": min_valid,
                  "wait_for_sign_in": wait_for_sign_in or None}
        started = False
        last_token: Optional[str] = None
        ended = False
        delay = 0.05
        while True:
            try:
                reader, writer = await self._connect()
            except DaemonUnreachable:
                if not started or not reconnect:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, max_delay)
                continue
            try:
                request_id = next(self._ids)
                try:
                    writer.write(encode_request(request_id, "token.watch", params))
                    await writer.drain()
                    answer = _readline(reader)
                    # A watch that waits for a sign-in is answered when it happens, not in time.
                    first = decode_answer(await (answer if params["wait_for_sign_in"] else asyncio.wait_for(answer, self.timeout)),
                                          request_id)
                except (ConnectionError, asyncio.TimeoutError) as error:
                    if not started or not reconnect:
                        raise DaemonUnreachable(f"authgated at {self.socket_path} did not answer the watch: {error}") from None
                    first = None
                except _PASSING as error:
                    if not started or not reconnect:
                        raise
                    if isinstance(error, LoginRequired):
                        if not ended:
                            ended = True
                            yield {"event": "ended", "reason": error.reason, "message": error.message}
                        # The next watch waits for the sign-in instead of asking again later.
                        params["wait_for_sign_in"] = True
                        continue
                    first = None
                    if isinstance(error, RateLimited) and error.retry_after_seconds:
                        delay = max(delay, float(error.retry_after_seconds))
                if first is None:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, max(max_delay, delay))
                    continue
                started = True
                delay = 0.05
                if ended or first.get("access_token") != last_token:
                    ended = False
                    last_token = first.get("access_token")
                    yield {"event": "token", **first}
                while True:
                    try:
                        line = await _readline(reader)
                    except ConnectionError:
                        line = b""
                    if not line:
                        break
                    event = decode_notification(line)
                    if event is None:
                        continue
                    if event["event"] == "token":
                        ended = False
                        last_token = event.get("access_token")
                    else:
                        ended = True
                    yield event
            finally:
                writer.close()
            if not reconnect:
                return


async def _readline(reader: asyncio.StreamReader) -> bytes:
    """One line (without its newline), b"" at the end of the stream."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as partial:
        if partial.partial:
            raise ProtocolError("authgated closed the connection in the middle of a line") from None
        return b""
    except asyncio.LimitOverrunError:
        raise ProtocolError("authgated's answer is too long") from None
    return line[:-1] or b" "  # an empty line is not the end
