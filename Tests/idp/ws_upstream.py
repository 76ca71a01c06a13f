"""A WebSocket upstream that takes Bearer tokens, on loopback over plain HTTP, for the tests of
`authgate proxy`'s protocol upgrades (Tests/AuthGateSystemTests/APIProxyTests.swift).

    .venv/bin/python Tests/idp/ws_upstream.py --workdir DIR [--tls]

  GET /ws/...         a WebSocket upgrade, accepted only with `Authorization: Bearer TOKEN`
                      (401 with WWW-Authenticate: Bearer error="invalid_token" without one).
                      Each text message is echoed, except "whoami", answered with the
                      fingerprint of the token the upgrade came with, and "close", after which
                      the server closes the connection (normal closure)
  GET /ws-refuse/...  401 to every upgrade, as /ws/ without a token
  GET /_seen          JSON: one {"path", "token", "upgrade"} per upgrade request above, in order,
                      where "token" is the fingerprint of its Bearer token (never the token) or
                      null, and "upgrade" whether it was accepted; and "closed": how many
                      accepted connections have ended

A fingerprint is the first 12 hex digits of a value's sha256 (as resource_api.py's).
Prints {"port": N, "url": "ws://127.0.0.1:N"} when it listens; serves until SIGTERM or its
parent dies. With --tls it serves wss:// with certs.py's server certificate (for 127.0.0.1),
and adds "ca_file", the CA that signed it, to what it prints.
"""

import argparse
import asyncio
import hashlib
import json
import os
import signal
import ssl
from pathlib import Path

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

import certs

SEEN = []
CLOSED = {"count": 0}


def fingerprint(token):
    return None if token is None else hashlib.sha256(token.encode()).hexdigest()[:12]


def bearer(request):
    authorization = request.headers.get("Authorization")
    if authorization and authorization.startswith("Bearer "):
        return authorization[len("Bearer "):]
    return None


def process_request(connection, request):
    path = request.path.split("?", 1)[0]
    if path == "/_seen":
        return connection.respond(200, json.dumps({"upgrades": SEEN, "closed": CLOSED["count"]}))
    token = bearer(request)
    accepted = path.startswith("/ws/") and token is not None
    SEEN.append({"path": path, "token": fingerprint(token), "upgrade": accepted})
    if not accepted:
        response = connection.respond(401, "refused\n")
        response.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
        return response
    return None


async def echo(connection):
    token = bearer(connection.request)
    try:
        async for message in connection:
            if message == "whoami":
                await connection.send(fingerprint(token))
            elif message == "close":
                await connection.close()
                break
            else:
                await connection.send(message)
    except ConnectionClosed:
        pass
    finally:
        CLOSED["count"] += 1


async def main(arguments) -> None:
    certs.unblock_stop_signals()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: os._exit(0))
    parent = os.getppid()
    tls, ready = None, {}
    if arguments.tls:
        workdir = Path(arguments.workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        ca_file, cert_file, key_file = certs.ensure_tls(workdir)
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(cert_file, key_file)
        ready["ca_file"] = str(ca_file)
    async with serve(echo, "127.0.0.1", 0, process_request=process_request, compression=None, ssl=tls) as server:
        port = server.sockets[0].getsockname()[1]
        scheme = "wss" if tls else "ws"
        print(json.dumps({"port": port, "url": f"{scheme}://127.0.0.1:{port}", **ready}), flush=True)
        while os.getppid() == parent:
            await asyncio.sleep(1)
    os._exit(0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--tls", action="store_true")
    asyncio.run(main(parser.parse_args()))
