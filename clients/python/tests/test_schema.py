"""docs/rpc.schema.json against the real daemon: every method's answer (and the params sent)
validates, errors and watch notifications too; the schema refuses what the daemon must not
send. Run by scripts/test with jsonschema in the test venv."""

import json
import os
import socket

import jsonschema
import pytest

from test_client import daemon  # noqa: F401  (the fixture: a daemon with a signed-in mock session)

SCHEMA_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "rpc.schema.json")
SCHEMA = json.load(open(SCHEMA_FILE))
jsonschema.Draft202012Validator.check_schema(SCHEMA)


def validate(instance, name):
    """Validates `instance` against $defs/name (or an x-methods entry's $ref)."""
    jsonschema.validate(instance, {"$ref": f"#/$defs/{name}", "$defs": SCHEMA["$defs"]},
                        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


class Raw:
    """A raw connection: the answers as the daemon wrote them, envelopes included."""

    def __init__(self, path):
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.settimeout(10)
        self.socket.connect(path)
        self.buffer = b""
        self.next_id = 0

    def line(self):
        while b"\n" not in self.buffer:
            chunk = self.socket.recv(65536)
            assert chunk, "the daemon closed the connection"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def call(self, method, params=None):
        """Sends a request whose params the schema must accept; returns the whole answer."""
        entry = SCHEMA["x-methods"][method]
        validate(params if params is not None else {}, entry["params"]["$ref"].split("/")[-1])
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            request["params"] = params
        self.socket.sendall(json.dumps(request).encode() + b"\n")
        answer = self.line()
        validate(answer, "response")
        assert answer["id"] == self.next_id
        if "result" in answer:
            validate(answer["result"], entry["result"]["$ref"].split("/")[-1])
        return answer


@pytest.fixture
def raw(daemon):  # noqa: F811
    return Raw(daemon.socket_path)


def test_every_method_answers_as_the_schema_says(raw):
    assert set(SCHEMA["x-methods"]) == {"providers.list", "login", "login.begin", "login.complete", "login.cancel", "register",
                                        "token", "credential.get", "token.watch", "token.rejected", "token.exchange", "dpop.proof", "userinfo", "status", "logout",
                                        "session.inspect", "daemon.info", "config.reload", "provider.discover", "provider.register",
                                        "provider.deregister", "metrics", "storage.rekey", "consent.list", "consent.revoke"}
    results = {}
    for method, params in [
        ("providers.list", None),
        ("login", {"provider": "mock", "username": "demo", "password": "demo-password-1", "session": "work",
                   "scopes": ["profile", "email"]}),
        ("token", {"provider": "mock", "session": "work", "scopes": ["email"]}),  # a narrower token
        ("register", {"provider": "mock", "username": "newcomer", "email": "newcomer@example.com",
                      "password": "Sturdy-passphrase-7", "password_confirmation": "Sturdy-passphrase-7", "session": "new"}),
        ("token", {"provider": "mock", "min_valid_seconds": 30}),
        ("userinfo", {"provider": "mock"}),
        ("session.inspect", {"provider": "mock", "session": "work", "refresh": True, "userinfo": True}),
        ("credential.get", {"host": "nowhere.example.com:443", "tool": "git"}),
        ("status", {}),
        ("status", {"all": True}),
        ("daemon.info", None),
        ("config.reload", None),
        ("metrics", None),
        ("storage.rekey", None),
        ("consent.list", None),
        ("consent.revoke", {"provider": "mock", "session": "work"}),
        ("logout", {"provider": "mock", "session": "work"}),
    ]:
        answer = raw.call(method, params)
        assert "result" in answer, f"{method}: {answer}"
        results[method] = answer["result"]
    token = results["token"]["access_token"]
    replaced = raw.call("token.rejected", {"provider": "mock", "access_token": token})["result"]
    assert replaced["access_token"] != token
    # Administrators' fields are there (the daemon's own user is one in user mode), and checked.
    assert "refresh" in results["daemon.info"] and "cached_token_answers" in results["daemon.info"]
    assert results["logout"] == {"removed": True, "revocation": {"status": "revoked"}}
    inspected = results["session.inspect"]
    assert inspected["refresh"]["status"] == "refreshed" and inspected["userinfo"]["status"] == "answered"
    assert inspected["refresh_token"] is True and inspected["id_token"] is None and inspected["dpop"] == {"required": False, "bound": False}
    assert results["credential.get"] is None


def test_errors_carry_a_reason_the_schema_lists(raw):
    for method, params, reason in [
        ("token", {"provider": "nope"}, "unknown_provider"),
        ("login", {"provider": "mock", "username": "demo", "password": "wrong-password"}, "invalid_credentials"),
        ("login.begin", {"provider": "mock", "grant": "device_code"}, "unsupported_grant"),
        ("login.complete", {"flow_id": "no-such-flow"}, "flow_expired"),
        ("token", {"provider": "mock", "session": "never"}, "login_required"),
        ("token.exchange", {"provider": "mock", "session": "never", "audience": "https://api.example.test"}, "login_required"),
        ("dpop.proof", {"provider": "mock", "session": "never", "htm": "GET", "htu": "https://api.example.test/"}, "login_required"),
        ("dpop.proof", {"provider": "mock", "htm": "GET", "htu": "not a url"}, "invalid_params"),
        ("token.exchange", {"provider": "mock", "audience": "a", "requested_token_type": "urn:ietf:params:oauth:token-type:refresh_token"},
         "invalid_params"),
        ("provider.discover", {"issuer": "http://sso.example.test"}, "validation_failed"),
        ("provider.register", {"issuer": "http://sso.example.test", "grants": ["authorization_code"],
                               "redirect_uris": ["http://127.0.0.1/callback"]}, "validation_failed"),
        ("provider.deregister", {"registration_client_uri": "http://sso.example.test/register/1",
                                 "registration_access_token": "t"}, "validation_failed"),
    ]:
        answer = raw.call(method, params)
        assert answer.get("error", {}).get("data", {}).get("reason") == reason, answer
    # A session that asks before a program gets its token, on a daemon with no way to ask.
    assert "result" in raw.call("login", {"provider": "mock", "username": "demo", "password": "demo-password-1",
                                          "session": "asks", "confirm": True})
    answer = raw.call("token", {"provider": "mock", "session": "asks"})
    assert answer.get("error", {}).get("data", {}).get("reason") == "consent_denied", answer
    assert raw.call("consent.list")["result"]["sessions"] == [{"provider": "mock", "session": "asks"}]
    # A line that is no request at all is answered with an error envelope too.
    raw.socket.sendall(b"not json\n")
    answer = raw.line()
    validate(answer, "response")
    assert answer["error"]["data"]["reason"] == "parse_error"


def test_a_watch_and_its_notifications(daemon):  # noqa: F811
    watch = Raw(daemon.socket_path)
    first = watch.call("token.watch", {"provider": "mock"})["result"]
    replaced = Raw(daemon.socket_path).call("token.rejected", {"provider": "mock", "access_token": first["access_token"]})["result"]
    changed = watch.line()
    validate(changed, "notification")
    assert changed["method"] == "token.changed"
    validate(changed["params"], "token.changed")
    assert changed["params"]["access_token"] == replaced["access_token"]
    Raw(daemon.socket_path).call("logout", {"provider": "mock"})
    ended = watch.line()
    validate(ended, "notification")
    assert ended["method"] == "session.ended"
    validate(ended["params"], "session.ended")
    assert ended["params"]["reason"] == "logged_out"


def test_the_schema_refuses_what_the_daemon_must_not_send(raw):
    token = raw.call("token", {"provider": "mock"})["result"]
    for broken in [
        {**token, "refresh_token": "never-handed-out"},      # an unknown field: results are closed
        {k: v for k, v in token.items() if k != "expires_at"},  # a required field missing
        {**token, "expires_at": "2026-11-25 10:00:00"},       # not RFC 3339 in UTC
    ]:
        with pytest.raises(jsonschema.ValidationError):
            validate(broken, "token.result")
    with pytest.raises(jsonschema.ValidationError):
        validate({"provider": "mock", "min_valid_seconds": -1}, "token.params")
