"""authgate_client with a DPoP session (RFC 9449) against the idpyoidc test server
(Tests/idp/idpy_server.py): `requests` calls a resource that verifies each proof, and the key
never reaches this process."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests

from authgate_client import AuthGateAuth, Client, ValidationFailed
from test_client import start_daemon

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def dpop_daemon():
    work = tempfile.mkdtemp(prefix="agdp-", dir="/tmp")  # socket paths must stay short
    server = subprocess.Popen([sys.executable, str(REPO / "Tests/idp/idpy_server.py"), "--workdir", f"{work}/idp"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    info = json.loads(server.stdout.readline())
    provider = {"type": "oidc", "issuer": info["issuer"], "client_id": "authgate-dpop", "grants": ["password"],
                "scopes": ["openid", "read"], "tls": {"ca_file": info["ca_file"]}, "dpop": "required"}
    daemon, socket_path = start_daemon(work, {"corp.json": json.dumps(provider)})
    client = Client(socket_path)
    client.call("login", {"provider": "corp", "username": "alice", "password": "alice-password-1"})
    yield client, info
    daemon.terminate()
    server.terminate()
    daemon.wait()
    server.wait()
    shutil.rmtree(work, ignore_errors=True)


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
