"""The auth classes' retry policy (requests' AuthGateAuth, httpx's HTTPXAuth and
AsyncHTTPXAuth) against the real daemon and loopback HTTP servers: only a 401 from the origin
the token was sent to is retried; a token the API refused is reported once; never a loop."""

import pytest

from authgate_client._auth import asks_for_nonce, origin
from loopback_http import LIBRARIES, Driver, Loopback, fingerprint
from test_client import daemon  # noqa: F401  (the fixture: a daemon with a signed-in mock session)

REFUSED = (401, {"WWW-Authenticate": 'Bearer error="invalid_token"'}, b"refused")
OK = (200, {"Content-Type": "text/plain"}, b"ok")


def refuse_the_first_token(server, record):
    """401 to the first token this server sees, 200 to any other."""
    first = server.seen[0]["token"]
    return REFUSED if record["token"] in (None, first) else OK


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("other_host", ["localhost", "127.0.0.1"])
def test_a_401_from_another_origin_is_not_retried(daemon, library, other_host):  # noqa: F811
    """Issue 26: a redirect to another origin drops the Authorization header; the 401 there
    must neither reach the daemon (token.rejected, a refresh) nor get the token re-sent."""
    before = fingerprint(daemon.token("mock").token)
    with Loopback(lambda server, record: REFUSED) as other:
        def redirect(server, record):
            return 302, {"Location": f"http://{other_host}:{other.port}/landing"}, b""
        with Loopback(redirect) as first:
            driver = Driver(library, daemon.socket_path, "mock")
            [response] = driver.get(first.url + "/start")
    assert response.status_code == 401 and [r.status_code for r in response.history] == [302]
    assert [r["scheme"] for r in first.seen] == ["Bearer"], "the origin authorised got the token"
    assert len(other.seen) == 1, "no retry to the other origin"
    assert [r["authorization"] for r in other.seen] == [None], "the other origin never sees an Authorization header"
    assert driver.methods == ["token"], "no token.rejected for another origin's 401"
    assert fingerprint(daemon.token("mock").token) == before, "no refresh"


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_stale_token_is_reported_and_the_request_retried_once(daemon, library):  # noqa: F811
    with Loopback(refuse_the_first_token) as api:
        driver = Driver(library, daemon.socket_path, "mock")
        [response] = driver.get(api.url + "/data")
    assert response.status_code == 200 and [r.status_code for r in response.history] == [401]
    assert driver.methods == ["token", "token.rejected"]
    tokens = [r["token"] for r in api.seen]
    assert len(tokens) == 2 and tokens[0] != tokens[1] and tokens[1] == fingerprint(daemon.token("mock").token)


@pytest.mark.parametrize("library", LIBRARIES)
def test_401s_at_once_to_one_token_report_it_once(daemon, library):  # noqa: F811
    """Requests in flight together with the same stale token: one token.rejected, whose
    answer the others wait for and take."""
    stale = daemon.token("mock").token

    def refuse_the_stale_token(server, record):
        return REFUSED if record["token"] == fingerprint(stale) else OK

    with Loopback(refuse_the_stale_token) as api:
        driver = Driver(library, daemon.socket_path, "mock")
        responses = driver.get_at_once(*[api.url + f"/{n}" for n in range(10)])
    assert [r.status_code for r in responses] == [200] * 10
    assert driver.methods.count("token.rejected") == 1
    assert len({r["token"] for r in api.seen}) == 2


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_stale_narrower_token_is_refreshed_once(daemon, library):  # noqa: F811
    """token.rejected takes no scopes or resource: a refused variant is refreshed by force
    when it is still the current one, and the session's own token is left alone."""
    daemon.call("login", {"provider": "mock", "username": "demo", "password": "demo-password-1", "session": "wide",
                          "scopes": ["profile", "email"]})
    own = fingerprint(daemon.token("mock", session="wide").token)
    with Loopback(refuse_the_first_token) as api:
        driver = Driver(library, daemon.socket_path, "mock", session="wide", scope="email")
        [response] = driver.get(api.url + "/data")
    assert response.status_code == 200 and [r.status_code for r in response.history] == [401]
    assert driver.methods == ["token", "token", "token"], "the variant, still the refused one, then refreshed"
    tokens = [r["token"] for r in api.seen]
    assert tokens[0] != tokens[1] == fingerprint(daemon.token("mock", session="wide", scope="email").token)
    assert fingerprint(daemon.token("mock", session="wide").token) == own


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_redirect_within_the_origin_keeps_the_retry(daemon, library):  # noqa: F811
    def api_with_redirect(server, record):
        if record["path"] == "/start":
            return 302, {"Location": "/landing"}, b""
        first = next(r["token"] for r in server.seen if r["path"] == "/landing")
        return REFUSED if record["token"] == first else OK

    with Loopback(api_with_redirect) as api:
        driver = Driver(library, daemon.socket_path, "mock")
        [response] = driver.get(api.url + "/start")
    assert response.status_code == 200
    assert driver.methods.count("token.rejected") == 1
    assert all(r["authorization"] is not None for r in api.seen), "the same origin: the header stays"


@pytest.mark.parametrize("library", LIBRARIES)
def test_an_api_that_refuses_everything_costs_one_refresh_per_token(daemon, library):  # noqa: F811
    with Loopback(lambda server, record: REFUSED) as api:
        driver = Driver(library, daemon.socket_path, "mock")
        responses = driver.get(*[api.url + f"/{n}" for n in range(5)])
        assert [r.status_code for r in responses] == [401] * 5
        assert driver.methods.count("token.rejected") == 1, "one report for the first token, none per request"
        assert len(api.seen) == 6, "the first request retried once, the others not at all"
        assert len({r["token"] for r in api.seen}) == 2
        # The session gets a new token (a refresh by another program): it is reported once too.
        daemon.token("mock", force_refresh=True)
        responses = driver.get(*[api.url + f"/again/{n}" for n in range(3)])
        assert [r.status_code for r in responses] == [401] * 3
        assert driver.methods.count("token.rejected") == 2
        assert len(api.seen) == 10 and len({r["token"] for r in api.seen}) == 4


def test_origins_and_challenges():
    assert origin("https://API.example.com/a?b") == origin("https://api.example.com:443/c") == ("https", "api.example.com", 443)
    assert origin("http://api.example.com/") == ("http", "api.example.com", 80)
    assert origin("http://api.example.com:8080/") != origin("http://api.example.com/")
    assert origin("https://api.example.com/") != origin("http://api.example.com:443/")
    assert origin("http://[::1]:9/") == ("http", "::1", 9)
    assert asks_for_nonce('DPoP error="use_dpop_nonce", error_description="Resource server requires nonce"')
    assert asks_for_nonce('Bearer realm="x", DPoP algs="ES256", error="use_dpop_nonce"')
    assert not asks_for_nonce('DPoP error="invalid_token"')
    assert not asks_for_nonce('Bearer error="use_dpop_nonce_not"')
    assert not asks_for_nonce(None)
