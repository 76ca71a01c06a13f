"""What every HTTPS test server in Tests/idp shares: TLS on 127.0.0.1 with the work
directory's certificates (certs.py), the ready line, and stopping on SIGTERM, SIGINT or the
parent's death."""

import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import certs


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver listens with a backlog of 5: more concurrent clients than that see dropped
    # SYNs and a 1 s retransmit, which would measure the test server instead of authgate.
    request_queue_size = 256

    def handle_error(self, request, client_address) -> None:
        # A client that gave up (timeouts, a failed TLS handshake) is part of the job here.
        if isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError, socket.timeout)):
            return
        super().handle_error(request, client_address)


def serve(handler, workdir: Path, port: int = 0, configure=None, tls=None, ready=None) -> None:
    """Serves `handler` over TLS on 127.0.0.1:`port` (0: a free one) until stopped.
    `configure(server)` runs before the ready line, to attach what the handler reads;
    `tls(context)` may change the server's ssl.SSLContext first (to ask for client
    certificates, say); `ready(server)` returns the ready line's document (by default
    {"port", "issuer", "ca_file"})."""
    certs.unblock_stop_signals()
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    ca_file, cert_file, key_file = certs.ensure_tls(workdir)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    if tls:
        tls(context)
    server = Server(("127.0.0.1", port), handler)
    # The handshake happens in the handler thread on first read, not in accept(): a client
    # that connects and stalls cannot block the server.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    port = server.server_address[1]
    server.issuer = f"https://127.0.0.1:{port}"
    if configure:
        configure(server)

    def stop(_signum, _frame):
        raise SystemExit(0)  # unwinds serve_forever in the main thread

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    parent = os.getppid()

    def watch_parent():
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch_parent, daemon=True).start()
    document = ready(server) if ready else {"port": port, "issuer": server.issuer, "ca_file": str(ca_file)}
    print(json.dumps(document), flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
