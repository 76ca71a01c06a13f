"""Starts a real OAuth 2.0 / OpenID Connect authorization server (django-oauth-toolkit under
gunicorn) over TLS on 127.0.0.1 for the Swift tests.

    .venv/bin/python Tests/idp/launch.py --workdir DIR [--port N]
        [--access-token-lifetime SECONDS] [--id-token-lifetime SECONDS]
        [--device-interval SECONDS] [--authorization-response-iss] [--cache-dir DIR]
        [--access-log]

When the server answers, one line of JSON goes to stdout:

    {"port": N, "issuer": "https://127.0.0.1:N/o", "ca_file": "DIR/ca.pem", "workdir": "DIR",
     "clients": {"authgate-password": {"secret_file": null}, ...,
                 "authgate-service": {"secret_file": "DIR/authgate-service.secret"}, ...},
     "users": {"alice": "alice-password-1", "bob": "bob-password-1"},
     "endpoints": {"discovery": ..., "token": ..., "revocation": ..., "userinfo": ...,
                   "jwks": ..., "authorization": ..., "device_authorization": ...,
                   "device_verification": ..., "introspection": ..., "login": ...}}

then it serves until SIGTERM or SIGINT (or until its parent process dies), stops gunicorn
and exits 0. Everything else (gunicorn's log, Django's warnings) goes to stderr, which the
caller must drain or redirect: a full pipe would stall the server.

DIR keeps the server's state: ca.pem, server.pem and server-key.pem (see certs.py), the
OpenID Connect signing key oidc-key.pem (RS256), the database db.sqlite3, and the plain
text of each confidential client's secret in <client_id>.secret (0600). Starting again on
the same DIR reuses all of it: same users, clients, tokens, certificate and signing key, so
a test can stop the server and start it again on the same port to simulate an outage.

Fixtures (authgate_idp/fixtures.py):
  users      alice / alice-password-1 (alice@example.com, Alice Example; sub "1")
             bob / bob-password-1 (bob@example.com, Bob Example; sub "2")
  clients    authgate-password               public, password grant
             authgate-device                 public, device authorization grant (RFC 8628)
             authgate-browser                public, authorization code + PKCE (S256 or plain),
                                             redirect URI http://127.0.0.1/callback on any
                                             port, consent skipped
             authgate-browser-consent        the same, but with a consent page (Authorize or
                                             Cancel, asked every time)
             authgate-service                confidential, client credentials,
                                             secret authgate-service-secret-1
             authgate-confidential-password  confidential, password grant,
                                             secret authgate-confidential-password-secret-1
  scopes     openid profile email offline_access read write (default: read write)
Every grant that returns a refresh token rotates it; the old one fails at once.

A fresh DIR gets a copy of a migrated database cached in --cache-dir (default
.build/idp-cache in the repository), rebuilt when the fixtures, settings or requirements
change; the first start builds it (a few seconds), later ones take about a second.
"""

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import certs
from authgate_idp.fixtures import CLIENTS, USERS  # plain data, imports no Django

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
READY_TIMEOUT = 60.0
# The signals received; acted on once gunicorn is up (or has failed to start).
stop_signals: list[int] = []


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--port", type=int, default=0, help="default: a free port")
    p.add_argument("--access-token-lifetime", type=int, default=3600, metavar="SECONDS")
    p.add_argument("--id-token-lifetime", type=int, metavar="SECONDS",
                   help="default: the access token lifetime")
    p.add_argument("--device-interval", type=int, default=1, metavar="SECONDS",
                   help="the polling interval the device endpoint asks for (default 1)")
    p.add_argument("--authorization-response-iss", action="store_true",
                   help="add iss to authorization responses and advertise it (RFC 9207)")
    p.add_argument("--cache-dir", type=Path, default=REPO / ".build" / "idp-cache")
    p.add_argument("--access-log", action="store_true", help="log every request to stderr")
    return p.parse_args()


def template_database(cache_dir: Path, env: dict) -> Path:
    """The migrated database with the fixtures, built once per version of what shapes it."""
    digest = hashlib.sha256()
    for f in [HERE / "requirements.txt", *sorted((HERE / "authgate_idp").glob("*.py"))]:
        digest.update(f.read_bytes())
    template = cache_dir / f"template-{digest.hexdigest()[:16]}.sqlite3"
    if not template.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        # Built under a temporary name and renamed: tests starting servers in parallel each
        # build their own and never see a half-written template.
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".building-", suffix=".sqlite3")
        os.close(fd)
        os.unlink(tmp)  # migrate wants to create the file itself
        try:
            subprocess.run([sys.executable, "-m", "authgate_idp.fixtures", tmp],
                           cwd=HERE, env=env, check=True, stdout=sys.stderr)
            os.replace(tmp, template)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return template


def prepare_workdir(args: argparse.Namespace, env: dict) -> Path:
    """Creates what DIR lacks (keys, certificates, database, secret files); returns ca.pem."""
    workdir = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    ca_file, _, _ = certs.ensure_tls(workdir)
    certs.ensure_rsa_key(workdir / "oidc-key.pem")
    db = workdir / "db.sqlite3"
    if not db.exists():
        tmp = db.with_name(".db.sqlite3.tmp")
        shutil.copyfile(template_database(args.cache_dir, env), tmp)
        os.replace(tmp, db)
    for client_id, (_, _, secret, *_rest) in CLIENTS.items():
        path = workdir / f"{client_id}.secret"
        if secret and not path.exists():
            certs.write_private(path, secret.encode())
    return ca_file


def wait_until_ready(url: str, ca_file: Path, server: subprocess.Popen) -> bool:
    """True once url answers 200 over TLS verified against ca_file; False if told to stop first."""
    context = ssl.create_default_context(cafile=str(ca_file))
    deadline = time.monotonic() + READY_TIMEOUT
    while not stop_signals:
        if server.poll() is not None:
            sys.exit(f"launch.py: gunicorn exited with status {server.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, context=context, timeout=5) as response:
                if response.status == 200:
                    return True
        except OSError:  # refused while gunicorn starts (URLError and ssl errors are OSErrors)
            pass
        if time.monotonic() > deadline:
            server.kill()
            sys.exit(f"launch.py: {url} did not answer within {READY_TIMEOUT:.0f} s")
        time.sleep(0.05)
    return False


def main() -> None:
    certs.unblock_stop_signals()
    launcher_parent = os.getppid()
    args = parse_args()
    args.workdir = args.workdir.resolve()
    # The launcher binds the port and hands the socket to gunicorn (fd://): a free port picked
    # here cannot be taken by a server starting in parallel, and a busy --port fails at once.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", args.port))
    except OSError as error:
        sys.exit(f"launch.py: cannot listen on 127.0.0.1:{args.port}: {error}")
    listener.listen(128)
    port = listener.getsockname()[1]
    origin, issuer = f"https://127.0.0.1:{port}", f"https://127.0.0.1:{port}/o"

    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="authgate_idp.settings",
        PYTHONPATH=str(HERE),
        AUTHGATE_IDP_WORKDIR=str(args.workdir),
        AUTHGATE_IDP_PORT=str(port),
        AUTHGATE_IDP_ACCESS_TOKEN_LIFETIME=str(args.access_token_lifetime),
        AUTHGATE_IDP_ID_TOKEN_LIFETIME=str(args.id_token_lifetime or args.access_token_lifetime),
        AUTHGATE_IDP_DEVICE_INTERVAL=str(args.device_interval),
        AUTHGATE_IDP_AUTHZ_RESPONSE_ISS="1" if args.authorization_response_iss else "0",
    )
    env.pop("AUTHGATE_IDP_DB", None)
    ca_file = prepare_workdir(args, env)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stop_signals.append(signum))

    workdir = args.workdir
    command = [
        sys.executable, "-m", "gunicorn", "authgate_idp.wsgi:application",
        "--bind", f"fd://{listener.fileno()}",
        "--certfile", str(workdir / certs.CERT_FILE), "--keyfile", str(workdir / certs.KEY_FILE),
        "--workers", "1", "--worker-class", "gthread", "--threads", "8",
        # Loaded before the worker forks, so a broken settings module fails the start at once.
        "--preload",
        "--chdir", str(HERE), "--log-level", "warning",
        # A stop is an outage, not a deploy: workers still holding the daemon's keep-alive
        # connections are killed at once instead of after 5 s (which made every test that
        # starts this server 5 s longer).
        "--graceful-timeout", "0",
        # gunicorn 24+ opens a control socket at one fixed path (~/.gunicorn/gunicorn.ctl)
        # that servers running side by side would fight over.
        "--no-control-socket",
        *(["--access-logfile", "-"] if args.access_log else []),
    ]
    parent = os.getpid()
    # gunicorn writes its access log to stdout: send it to stderr, stdout is for the JSON line.
    server = subprocess.Popen(command, cwd=HERE, env=env, stdout=sys.stderr, pass_fds=[listener.fileno()],
                              preexec_fn=lambda: certs.die_with_parent(parent))
    listener.close()  # gunicorn has its own copy; the port is free again once it exits
    try:
        if not wait_until_ready(f"{issuer}/.well-known/openid-configuration", ca_file, server):
            return
        print(json.dumps({
            "port": port,
            "issuer": issuer,
            "ca_file": str(ca_file),
            "workdir": str(workdir),
            "clients": {
                client_id: {"secret_file": str(workdir / f"{client_id}.secret") if spec[2] else None}
                for client_id, spec in CLIENTS.items()
            },
            "users": {name: spec[0] for name, spec in USERS.items()},
            "endpoints": {
                "discovery": f"{issuer}/.well-known/openid-configuration",
                "authorization": f"{issuer}/authorize/",
                "token": f"{issuer}/token/",
                "revocation": f"{issuer}/revoke_token/",
                "introspection": f"{issuer}/introspect/",
                "userinfo": f"{issuer}/userinfo/",
                "jwks": f"{issuer}/.well-known/jwks.json",
                "device_authorization": f"{issuer}/device-authorization/",
                "device_verification": f"{issuer}/device/",
                "login": f"{origin}/accounts/login/",
            },
        }), flush=True)

        # Serve until told to stop, gunicorn dies, or our parent does (we are then reparented).
        while not stop_signals and server.poll() is None and os.getppid() == launcher_parent:
            time.sleep(0.2)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)  # gunicorn's quick shutdown
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    if not stop_signals and server.returncode not in (0, None):
        sys.exit(f"launch.py: gunicorn exited with status {server.returncode}")


if __name__ == "__main__":
    main()
