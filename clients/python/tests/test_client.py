"""authgate_client against the real daemon (the build's authgated, a mock provider), run by
scripts/test with the package installed in the test venv."""

import http.server
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from datetime import timedelta

import pytest
import requests

import authgate_client
from authgate_client import AuthGateAuth, Client, DaemonUnreachable, LoginRequired, Token, UnknownProvider

MOCK = '{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}]}'


def start_daemon(work: str, providers: dict) -> tuple:
    """Starts the build's authgated in `work` with `providers` (file name → JSON text) and waits
    until its socket accepts a connection (the file exists from bind(), a moment before the
    daemon listens: a connect then is refused); returns the process and the socket's path."""
    binaries = os.environ.get("AUTHGATE_BIN_DIR", ".build/debug")
    os.makedirs(f"{work}/providers.d", exist_ok=True)
    for name, text in providers.items():
        with open(f"{work}/providers.d/{name}", "w") as file:
            file.write(text)
    socket_path = f"{work}/s.sock"
    process = subprocess.Popen([f"{binaries}/authgated", "--user", "--providers", f"{work}/providers.d", "--socket", socket_path,
                                "--state-dir", f"{work}/state", "--log-level", "warning",
                                # never the keyring of whoever runs the tests (storage.rekey opens the store)
                                "--key-store", "file"], stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not _accepts(socket_path):
        if time.time() > deadline or process.poll() is not None:
            process.kill()
            process.wait()
            pytest.fail("authgated did not start")
        time.sleep(0.02)
    return process, socket_path


def _accepts(socket_path: str) -> bool:
    """Whether a connection to the socket is accepted."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(socket_path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


@pytest.fixture
def daemon():
    work = tempfile.mkdtemp(prefix="agpy-", dir="/tmp")  # socket paths must stay short
    process = None
    try:
        process, socket_path = start_daemon(work, {"mock.json": MOCK})
        client = Client(socket_path)
        client.call("login", {"provider": "mock", "username": "demo", "password": "demo-password-1"})
        yield client
    finally:
        if process is not None:
            process.terminate()
            process.wait()
        shutil.rmtree(work, ignore_errors=True)


def test_installed_from_the_package():
    assert "site-packages" in authgate_client.__file__, authgate_client.__file__


def test_token_and_result(daemon):
    token = daemon.token("mock")
    assert isinstance(token, Token) and token.token.startswith("mock_at_") and token.access_token == token.token
    assert token.token_type == "Bearer" and token.authorization == f"Bearer {token.token}"
    assert token.expires_at.tzinfo is not None and timedelta(minutes=50) < token.expires_in() <= timedelta(hours=1)
    assert token.token not in repr(token) and token.token not in str(token), "a Token never shows its token"
    result = daemon.token_result("mock", min_valid=60)  # the dict, as before
    assert result["access_token"] == token.token and result["token_type"] == "Bearer" and "expires_at" in result
    assert [p["id"] for p in daemon.providers()] == ["mock"]
    assert [s["provider"] for s in daemon.status()] == ["mock"]
    assert all("access_token" not in s for s in daemon.status())
    assert daemon.info()["version"] == authgate_client.__version__


def test_token_options(daemon):
    daemon.call("login", {"provider": "mock", "username": "demo", "password": "demo-password-1", "session": "wide",
                          "scopes": ["profile", "email"]})
    wide = daemon.token("mock", session="wide")
    narrow = daemon.token("mock", session="wide", scope="email")
    assert narrow.scopes == ("email",) and narrow.token != wide.token
    assert daemon.token("mock", session="wide", scope=["email"]).token == narrow.token, "cached per combination"
    assert daemon.token("mock", session="wide", min_valid=3000).token == wide.token
    forced = daemon.token("mock", session="wide", force_refresh=True)
    assert forced.token != wide.token and daemon.token("mock", session="wide").token == forced.token
    with pytest.raises(TypeError):
        daemon.token("mock", "wide")  # the options are keywords


def test_errors_by_reason(daemon):
    with pytest.raises(UnknownProvider) as unknown:
        daemon.token("nope")
    assert unknown.value.reason == "unknown_provider" and "nope" in unknown.value.message
    with pytest.raises(LoginRequired):
        daemon.token("mock", session="never-signed-in")
    with pytest.raises(DaemonUnreachable):
        Client("/tmp/nothing-listens-here.sock").token("mock")


def test_token_rejected(daemon):
    first = daemon.token("mock").token
    second = daemon.token_rejected("mock", first)
    assert second.token != first, "the current token was refused: the session is refreshed"
    assert daemon.token_rejected("mock", first).token == second.token, "an old token: the current one, no refresh"


def test_requests_auth_retries_once_after_401(daemon):
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            token = self.headers.get("Authorization", "")
            seen.append(token)
            status = 401 if len(seen) == 1 else 200  # the first token is "stale"
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        response = requests.get(f"http://127.0.0.1:{server.server_address[1]}/", auth=AuthGateAuth("mock", client=daemon))
    finally:
        server.shutdown()
    assert response.status_code == 200
    assert [r.status_code for r in response.history] == [401]
    assert len(seen) == 2 and seen[0] != seen[1] and all(s.startswith("Bearer mock_at_") for s in seen)
    assert seen[1] == daemon.token("mock").authorization


def test_watch_yields_each_token_and_the_end(daemon):
    events = daemon.watch("mock", min_valid=0)
    first = next(events)
    assert first["event"] == "token" and first["access_token"] == daemon.token("mock").token
    refreshed = daemon.token_result("mock", force_refresh=True)["access_token"]
    changed = next(events)
    assert changed["event"] == "token" and changed["access_token"] == refreshed != first["access_token"]
    daemon.call("logout", {"provider": "mock"})
    ended = next(events)
    assert ended == {"event": "ended", "reason": "logged_out", "message": ended["message"]} and ended["message"]
    events.close()


def test_watch_refused(daemon):
    with pytest.raises(UnknownProvider):
        next(daemon.watch("nope"))
