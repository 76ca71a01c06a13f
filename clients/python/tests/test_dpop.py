"""authgate_client with a DPoP session (RFC 9449) against the idpyoidc test server
(Tests/idp/idpy_server.py): `requests` calls a resource that verifies each proof, and the key
never reaches this process."""

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests

from authgate_client import AuthGateAuth, Client, ValidationFailed
from loopback_http import LIBRARIES, DPoPResource, Driver
from test_client import start_daemon

REPO = Path(__file__).resolve().parents[3]


@contextlib.contextmanager
def dpop_setup(prefix):
    """authgated with a provider "corp" at the idpyoidc server ("dpop": "required") and a
    signed-in DPoP session; yields a Client and the server's info."""
    work = tempfile.mkdtemp(prefix=prefix, dir="/tmp")  # socket paths must stay short
    server = subprocess.Popen([sys.executable, str(REPO / "Tests/idp/idpy_server.py"), "--workdir", f"{work}/idp"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    daemon = None
    try:
        info = json.loads(server.stdout.readline())
        provider = {"type": "oidc", "issuer": info["issuer"], "client_id": "authgate-dpop", "grants": ["password"],
                    "scopes": ["openid", "read"], "tls": {"ca_file": info["ca_file"]}, "dpop": "required"}
        daemon, socket_path = start_daemon(work, {"corp.json": json.dumps(provider)})
        client = Client(socket_path)
        client.call("login", {"provider": "corp", "username": "alice", "password": "alice-password-1"})
        yield client, info
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait()
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def dpop_daemon():
    with dpop_setup("agdp-") as setup:
        yield setup


@pytest.fixture(scope="module")
def shared_dpop_daemon():
    """One DPoP session for the tests that do not mind what the others did to it."""
    with dpop_setup("agds-") as setup:
        yield setup


def idp_stats(info):
    return requests.get(info["endpoints"]["stats"], verify=info["ca_file"], timeout=10).json()


def test_requests_auth_sends_a_proof_the_resource_accepts(dpop_daemon):
    client, info = dpop_daemon
    resource = info["endpoints"]["resource"]
    answer = requests.get(resource, auth=AuthGateAuth("corp", client=client), verify=info["ca_file"])
    assert answer.status_code == 200, answer.text
    jkt = client.status("corp")[0]["dpop_jkt"]
    assert answer.json()["cnf"]["jkt"] == jkt
    headers = client.authorization_headers("corp", "GET", resource)
    assert headers["Authorization"].startswith("DPoP ") and headers["DPoP"].count(".") == 2
    # The token without the proof, or the proof of another URL, is refused.
    bare = {"Authorization": headers["Authorization"]}
    assert requests.get(resource, headers=bare, verify=info["ca_file"]).status_code == 401
    other = dict(bare, DPoP=client.dpop_proof("corp", "GET", info["issuer"] + "/elsewhere"))
    assert requests.get(resource, headers=other, verify=info["ca_file"]).status_code == 401


def test_exchange(dpop_daemon):
    client, _ = dpop_daemon
    exchanged = client.exchange("corp", audience="https://api.example.test")
    assert exchanged["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    assert exchanged["access_token"] != client.token("corp")
    with pytest.raises(ValidationFailed):
        client.exchange("corp", audience="https://forbidden.example.test")


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_nonce_then_a_stale_token(shared_dpop_daemon, library):
    """A resource that wants a DPoP nonce first, then refuses the (stale) token: one retry
    with the nonce, one token.rejected, one refresh at the provider; the next request sends
    the remembered nonce at once."""
    client, info = shared_dpop_daemon
    refreshes = idp_stats(info)["token_requests"]
    with DPoPResource(refuse_first=True) as resource:
        driver = Driver(library, client.socket_path, "corp")
        [response] = driver.get(resource.url + "/data?page=1")
        assert response.status_code == 200 and [r.status_code for r in response.history] == [401, 401]
        assert resource.bad_proofs == [], "every proof verified (signature, htm, htu, ath, jti)"
        assert resource.challenges == 1, "exactly one nonce retry"
        assert driver.methods.count("token.rejected") == 1
        tokens = [r["token"] for r in resource.seen]
        assert len(tokens) == 3 and tokens[0] == tokens[1] != tokens[2], "the nonce retry keeps the token"
        assert idp_stats(info)["token_requests"] - refreshes == 1, "one refresh at the provider"

        driver.methods.clear()
        [response] = driver.get(resource.url + "/data?page=2")
        assert response.status_code == 200 and response.history == []
        assert resource.challenges == 1, "the origin's nonce is remembered"
        assert driver.methods == ["token", "dpop.proof"]
        assert resource.bad_proofs == []
    assert idp_stats(info)["token_requests"] - refreshes == 1


@pytest.mark.parametrize("library", LIBRARIES)
def test_the_idp_resource_asks_for_a_nonce(shared_dpop_daemon, library):
    """idpyoidc's own resource in its resource-nonce mode: one challenge, one retry, no
    token.rejected; the nonce is remembered for the next request."""
    client, info = shared_dpop_daemon
    control = {"url": info["endpoints"]["control"], "verify": info["ca_file"], "timeout": 10}
    requests.post(json={"mode": "resource-nonce"}, **control).raise_for_status()
    try:
        before = idp_stats(info)
        driver = Driver(library, client.socket_path, "corp", verify=info["ca_file"])
        answers = driver.get(info["endpoints"]["resource"], info["endpoints"]["resource"])
        after = idp_stats(info)
    finally:
        requests.post(json={"mode": "normal"}, **control).raise_for_status()
    assert [a.status_code for a in answers] == [200, 200]
    assert [len(a.history) for a in answers] == [1, 0]
    assert after["nonce_challenges"] - before["nonce_challenges"] == 1
    assert after["token_requests"] == before["token_requests"] and "token.rejected" not in driver.methods
