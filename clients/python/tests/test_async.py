"""AsyncClient against the real daemon: the methods on asyncio, many calls at once on one
event loop without threads, and a watch that outlives a restart of the daemon."""

import asyncio
import os
import shutil
import tempfile
import threading
import time

import pytest

from authgate_client import AsyncClient, DaemonUnreachable, LoginRequired, Token, UnknownProvider
from loopback_http import fingerprint
from test_client import MOCK, daemon, start_daemon  # noqa: F401  (daemon: the fixture)

LOGIN = {"provider": "mock", "username": "demo", "password": "demo-password-1"}


def test_the_methods_on_asyncio(daemon):  # noqa: F811
    async def run():
        client = AsyncClient(daemon.socket_path)
        token = await client.token("mock")
        assert isinstance(token, Token) and token.token_type == "Bearer"
        assert fingerprint(token.token) == fingerprint(daemon.token("mock").token)
        assert (await client.token_result("mock"))["access_token"] == token.token
        replaced = await client.token_rejected("mock", token.token)
        assert replaced.token != token.token
        assert (await client.authorization_headers("mock", "GET", "https://api.example.test/"))["Authorization"] \
            == replaced.authorization
        assert [p["id"] for p in await client.providers()] == ["mock"]
        assert [s["provider"] for s in await client.status()] == ["mock"]
        assert (await client.info())["version"] == daemon.info()["version"]
        with pytest.raises(UnknownProvider):
            await client.token("nope")
        with pytest.raises(LoginRequired):
            await client.token("mock", session="never-signed-in")
        with pytest.raises(DaemonUnreachable):
            await AsyncClient("/tmp/nothing-listens-here.sock").token("mock")
    asyncio.run(run())


def test_200_concurrent_token_calls_on_one_event_loop(daemon):  # noqa: F811
    threads = threading.active_count()
    most = []

    async def one(client):
        token = await client.token("mock", min_valid=60)
        most.append(threading.active_count())
        return token.token

    async def run():
        client = AsyncClient(daemon.socket_path)
        return await asyncio.wait_for(asyncio.gather(*[one(client) for _ in range(200)]), 30)

    tokens = asyncio.run(run())
    assert len(tokens) == 200 and len(set(tokens)) == 1
    assert fingerprint(tokens[0]) == fingerprint(daemon.token("mock").token)
    assert max(most) <= threads, "no thread per call"


def test_the_async_watch_reconnects_after_the_daemon_restarts():
    work = tempfile.mkdtemp(prefix="agaw-", dir="/tmp")
    process, socket_path = start_daemon(work, {"mock.json": MOCK})

    async def next_event(events):
        return await asyncio.wait_for(events.__anext__(), 20)

    async def run():
        nonlocal process
        client = AsyncClient(socket_path)
        await client.call("login", LOGIN)
        events = client.watch("mock", min_valid=0, max_delay=0.2)
        first = await next_event(events)
        assert first["event"] == "token"
        refreshed = await client.token("mock", force_refresh=True)
        changed = await next_event(events)
        assert changed["event"] == "token" and fingerprint(changed["access_token"]) == fingerprint(refreshed.token)

        # The daemon restarts; the watch is opened again on the new one.
        process.terminate()
        process.wait()
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        process, _ = start_daemon(work, {"mock.json": MOCK})
        await client.call("login", LOGIN)  # a new sign-in: a new token, however the session was kept
        expected = fingerprint((await client.token("mock")).token)
        deadline = time.monotonic() + 20
        seen = []
        while time.monotonic() < deadline:
            event = await next_event(events)
            seen.append(event["event"])
            if event["event"] == "token" and fingerprint(event["access_token"]) == expected:
                break
        else:
            pytest.fail(f"no event with the new token after the restart: {seen}")
        assert set(seen) <= {"token", "ended"}

        # And it still follows the session on the new connection.
        again = await client.token("mock", force_refresh=True)
        event = await next_event(events)
        assert event["event"] == "token" and fingerprint(event["access_token"]) == fingerprint(again.token)
        await events.aclose()

    try:
        asyncio.run(run())
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(work, ignore_errors=True)


def test_the_async_watch_without_reconnect_ends_and_refusals_raise(daemon):  # noqa: F811
    async def run():
        client = AsyncClient(daemon.socket_path)
        with pytest.raises(UnknownProvider):
            await client.watch("nope").__anext__()
        with pytest.raises(DaemonUnreachable):
            await AsyncClient("/tmp/nothing-listens-here.sock").watch("mock").__anext__()
        events = client.watch("mock", reconnect=False)
        assert (await events.__anext__())["event"] == "token"
        await client.call("logout", {"provider": "mock"})
        ended = await asyncio.wait_for(events.__anext__(), 10)
        assert ended["event"] == "ended" and ended["reason"] == "logged_out"
        await events.aclose()
    asyncio.run(run())


def test_a_watch_started_before_the_sign_in_sees_it_within_a_second(daemon):  # noqa: F811
    """wait_for_sign_in: no LoginRequired, no polling: the daemon answers with the sign-in's
    token (issue 30: a watch started before the sign-in learns of it within 1 s)."""
    login = {**LOGIN, "session": "later"}

    async def run():
        client = AsyncClient(daemon.socket_path)
        events = client.watch("mock", session="later", min_valid=0, wait_for_sign_in=True)
        waiting = asyncio.ensure_future(events.__anext__())
        # Nothing arrives, and nothing is refused, while there is no session (a window on purpose).
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(waiting), 0.5)
        await client.call("login", login)
        signed_in = time.monotonic()
        first = await asyncio.wait_for(waiting, 10)
        seen_after = time.monotonic() - signed_in
        assert first["event"] == "token"
        assert fingerprint(first["access_token"]) == fingerprint((await client.token("mock", session="later")).token)
        assert seen_after < 1.0, f"the sign-in was seen {seen_after:.3f} s late"
        await events.aclose()
        await client.call("logout", {"provider": "mock", "session": "later"})

    asyncio.run(run())


def test_the_blocking_watch_waits_for_the_sign_in_too(daemon):  # noqa: F811
    login = {**LOGIN, "session": "blocking"}
    first = {}

    def watch():
        events = daemon.watch("mock", session="blocking", min_valid=0, wait_for_sign_in=True)
        first.update(next(events))
        events.close()

    thread = threading.Thread(target=watch)
    thread.start()
    thread.join(0.5)
    assert thread.is_alive() and not first, "it waits (no LoginRequired) while there is no session"
    daemon.call("login", login)
    signed_in = time.monotonic()
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - signed_in < 1.0
    assert first["event"] == "token" and first["access_token"] == daemon.token("mock", session="blocking").token
    daemon.call("logout", {"provider": "mock", "session": "blocking"})
    with pytest.raises(LoginRequired):
        next(daemon.watch("mock", session="blocking"))
