"""Plays the human user against the test authorization server (launch.py) for the Swift tests
of the interactive logins.

    play_user.py device --ca-file CA --verification-uri URI [--user-code CODE]
        --username U --password P [--deny]
        Signs in, enters the user code on DOT's device page and accepts (or denies) the
        device. Without --user-code the code already in the page's form is used (pass
        verification_uri_complete as URI). Prints
        {"action": "accept"|"deny", "user_code": ..., "client_id": ..., "status": "Authorized"|"Denied"}

    play_user.py browser --ca-file CA --authorization-url URL --username U --password P
        [--deny] [--no-follow]
        Opens the authorization URL, signs in when sent to the login page, answers the consent
        page if one appears, and stops at the redirect that leaves the server (the client's
        loopback redirect URI). Then GETs that URL (plain http, the daemon's listener) and prints
        {"redirect": URL, "consent": "skipped"|"accepted"|"denied",
         "callback_status": N, "callback_body": "<first 500 characters>"}
        or, with --no-follow, the same without the callback_* keys. --deny presses Cancel on
        the consent page; it fails if the client skips consent (authgate-browser does, use
        authgate-browser-consent).

Prints one line of JSON on stdout and exits 0, or exits 1 with a message on stderr. Every
request times out after 10 s. Only the standard library, no proxy (127.0.0.1 only).
"""

import argparse
import http.cookiejar
import json
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser

TIMEOUT = 10.0
MAX_STEPS = 20  # requests per flow: a loop (say the login page answering itself) ends here


def die(message: str) -> None:
    sys.exit(f"play_user.py: {message}")


class Page(HTMLParser):
    """The parts of a Django page the flows need: its forms (fields and submit buttons), the
    text of its form errors (<ul class="errorlist">), and its headings and paragraphs (where
    DOT's error pages put the error code and its description)."""

    def __init__(self, html: str):
        super().__init__()
        self.forms: list[dict] = []
        self.errors: list[str] = []
        self.headings: list[str] = []
        self.paragraphs: list[str] = []
        self._in_errors = 0
        self._in_text: list[str] | None = None  # the list an open h1, h2 or p adds to
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "method": a.get("method", "get").lower(),
                               "fields": [], "buttons": []})
        elif tag == "input" and self.forms and "name" in a:
            kind = a.get("type", "text").lower()
            target = "buttons" if kind == "submit" else "fields"
            self.forms[-1][target].append((a["name"], a.get("value", ""), kind))
        elif tag == "button" and self.forms and "name" in a:
            self.forms[-1]["buttons"].append((a["name"], a.get("value", ""), "submit"))
        elif tag == "ul" and "errorlist" in a.get("class", ""):
            self._in_errors += 1
        elif tag in ("h1", "h2", "p"):
            self._in_text = self.paragraphs if tag == "p" else self.headings
            self._in_text.append("")

    def handle_endtag(self, tag):
        if tag == "ul" and self._in_errors:
            self._in_errors -= 1
        elif tag in ("h1", "h2", "p"):
            self._in_text = None

    def handle_data(self, data):
        if self._in_errors and data.strip():
            self.errors.append(data.strip())
        if self._in_text is not None:
            self._in_text[-1] += data

    def form_with(self, name: str) -> dict | None:
        """The first form with a field or button called name."""
        for form in self.forms:
            if any(f[0] == name for f in form["fields"] + form["buttons"]):
                return form
        return None

    def summary(self) -> str:
        texts = self.errors or [" ".join(t.split()) for t in self.headings + self.paragraphs]
        return "; ".join(t for t in texts if t) or "no message on the page"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Hands 30x answers back as they are: Browser follows redirects itself, to stop at the
    one that leaves the server (the loopback redirect URI)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Browser:
    """A cookie-keeping client for one origin (https://127.0.0.1:PORT)."""

    def __init__(self, ca_file: str, start_url: str):
        parts = urllib.parse.urlsplit(start_url)
        if parts.scheme != "https":
            die(f"{start_url}: expected an https URL")
        self.origin = f"{parts.scheme}://{parts.netloc}"
        # Django marks its sessionid and csrftoken cookies Secure (settings.py): the jar sends
        # them back over https only, so they never reach the plain http loopback listener.
        self.jar = http.cookiejar.CookieJar()
        context = ssl.create_default_context(cafile=ca_file)
        self.opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),  # no http(s)_proxy for 127.0.0.1
            urllib.request.HTTPSHandler(context=context),
            urllib.request.HTTPCookieProcessor(self.jar),
            NoRedirect(),
        )

    def request(self, url: str, data: dict | list | None = None, referer: str | None = None):
        """One request (POST when data is given): (status, headers, body text)."""
        headers = {"User-Agent": "authgate-play-user"}
        body = None
        if data is not None:
            body = urllib.parse.urlencode(data).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            # Django's CSRF check over https wants, besides the csrfmiddlewaretoken field that
            # matches the csrftoken cookie, an Origin (or, without one, a Referer) on a trusted
            # origin: sent as a browser would, the page holding the form.
            headers["Origin"] = self.origin
            if referer:
                headers["Referer"] = referer
        req = urllib.request.Request(url, data=body, headers=headers)
        try:
            with self.opener.open(req, timeout=TIMEOUT) as response:
                return response.status, response.headers, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:  # 30x (NoRedirect) and 4xx/5xx land here
            with error:
                return error.code, error.headers, error.read().decode("utf-8", "replace")
        except OSError as error:
            die(f"{req.get_method()} {url}: {error}")

    def walk(self, url: str, data=None, referer=None):
        """Requests url and follows redirects on this origin. Returns ("page", url, status,
        body) for the first non-redirect answer, or ("leave", location) for a redirect to
        another origin (the client's redirect URI)."""
        for _ in range(MAX_STEPS):
            status, headers, body = self.request(url, data, referer)
            if status not in (301, 302, 303, 307, 308):
                return "page", url, status, body
            location = urllib.parse.urljoin(url, headers.get("Location", ""))
            parts = urllib.parse.urlsplit(location)
            if f"{parts.scheme}://{parts.netloc}" != self.origin:
                return "leave", location
            url, data, referer = location, None, None
        die(f"more than {MAX_STEPS} redirects from {url}")

    def submit(self, page_url: str, form: dict, values: dict, button: tuple | None = None):
        """Posts form as a browser would: its fields (hidden ones included, the CSRF token
        among them) overridden by values, plus the pressed button's name=value if it has a name."""
        fields = [(name, values.pop(name, value)) for name, value, kind in form["fields"]]
        fields += list(values.items())
        if button is not None:
            fields.append(button[:2])
        if form["method"] != "post":
            die(f"{page_url}: expected a POST form")
        action = urllib.parse.urljoin(page_url, form["action"]) if form["action"] else page_url
        return self.walk(action, fields, referer=page_url)

    def sign_in_if_asked(self, step, username: str, password: str):
        """If step is the login page (a form with a password field), signs in and returns the
        step after it (the page the login redirects back to); otherwise returns step."""
        if step[0] != "page":
            return step
        _, url, status, body = step
        page = Page(body)
        form = page.form_with("password")
        if form is None:
            return step
        after = self.submit(url, form, {"username": username, "password": password})
        if after[0] == "page" and Page(after[3]).form_with("password") is not None:
            die(f"signing in as {username} failed: {Page(after[3]).summary()}")
        return after


def expect_page(step, what: str):
    """The (url, Page) of step, which must be a 200 page."""
    if step[0] == "leave":
        die(f"expected {what}, got a redirect to {step[1]}")
    _, url, status, body = step
    if status != 200:
        # DOT answers some errors with JSON (prompt=create), others with an HTML page.
        reason = body.strip()[:300] if body.lstrip().startswith("{") else Page(body).summary()
        die(f"expected {what}, got HTTP {status} from {url}: {reason}")
    return url, Page(body)


def device(args) -> dict:
    browser = Browser(args.ca_file, args.verification_uri)
    # DOT's device pages require a signed-in user: the first GET redirects to the login page.
    step = browser.sign_in_if_asked(browser.walk(args.verification_uri), args.username, args.password)
    url, page = expect_page(step, "the user code page")
    form = page.form_with("user_code")
    if form is None:
        die(f"{url}: no user code form")
    user_code = args.user_code or dict((f[0], f[1]) for f in form["fields"]).get("user_code", "")
    if not user_code:
        die("no --user-code and none filled in by the verification page")
    # A valid code redirects to /o/device-confirm/<client_id>/<user_code>; a bad one renders
    # the form again with the reason ("Incorrect user code", "Expired user code", ...).
    url, page = expect_page(browser.submit(url, form, {"user_code": user_code}), "the confirmation page")
    form = page.form_with("action")
    if form is None:
        die(f"user code {user_code} refused: {page.summary()}")
    action = "deny" if args.deny else "accept"
    button = next((b for b in form["buttons"] if b[0] == "action" and b[1] == action), None)
    if button is None:
        die(f"{url}: no {action} button")
    client_id = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rstrip("/").split("/")[-2])
    # Accepting or denying redirects to the grant's status page: <h1> Device Authorized </h1>.
    url, page = expect_page(browser.submit(url, form, {}, button), "the device status page")
    status = " ".join(page.headings).split()[-1] if page.headings else ""
    if status != ("Denied" if args.deny else "Authorized"):
        die(f"unexpected status page after {action}: {page.summary()}")
    return {"action": action, "user_code": user_code, "client_id": client_id, "status": status}


def browser_flow(args) -> dict:
    browser = Browser(args.ca_file, args.authorization_url)
    step = browser.sign_in_if_asked(browser.walk(args.authorization_url), args.username, args.password)
    consent = "skipped"
    if step[0] == "page":
        url, page = expect_page(step, "the consent page or a redirect to the client")
        # DOT's consent page (oauth2_provider/authorize.html): hidden fields carrying the
        # request, an "Authorize" submit named allow, and a nameless "Cancel" submit. Cancel
        # posts the form without allow, which DOT answers with error=access_denied.
        form = page.form_with("allow")
        if form is None:
            die(f"expected the consent page or a redirect to the client, got {url}: {page.summary()}")
        allow = next(b for b in form["buttons"] if b[0] == "allow")
        consent = "denied" if args.deny else "accepted"
        step = browser.submit(url, form, {}, None if args.deny else allow)
        if step[0] == "page":
            url, page = expect_page(step, "a redirect to the client")
            die(f"expected a redirect to the client after the consent page, got {url}: {page.summary()}")
    elif args.deny:
        die(f"--deny: the server showed no consent page (the client skips authorization) and "
            f"redirected to {step[1]}")
    result = {"redirect": step[1], "consent": consent}
    if args.no_follow:
        return result
    # The daemon's loopback listener: plain http, no cookies, no proxy, no redirects followed.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect())
    try:
        with opener.open(step[1], timeout=TIMEOUT) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            status, body = error.code, error.read()
    except OSError as error:
        die(f"GET {step[1]}: {error}")
    result.update(callback_status=status, callback_body=body.decode("utf-8", "replace")[:500])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    d = commands.add_parser("device", help="approve (or deny) a device authorization")
    d.add_argument("--verification-uri", required=True)
    d.add_argument("--user-code", help="default: the one in verification_uri_complete")
    b = commands.add_parser("browser", help="run an authorization request to its redirect")
    b.add_argument("--authorization-url", required=True)
    b.add_argument("--no-follow", action="store_true", help="print the redirect, do not GET it")
    for sub in (d, b):
        sub.add_argument("--ca-file", required=True)
        sub.add_argument("--username", required=True)
        sub.add_argument("--password", required=True)
        sub.add_argument("--deny", action="store_true")
    args = parser.parse_args()
    result = device(args) if args.command == "device" else browser_flow(args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
