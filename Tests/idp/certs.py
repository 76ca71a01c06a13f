"""Key material and small process helpers shared by launch.py, faulty.py and idpy_server.py.

Each server's work directory holds a throw-away certificate authority and a server
certificate for 127.0.0.1 that it signed; a directory that already has them keeps them, so
a server restarted on the same directory presents the same certificate:

  ca.pem            the CA certificate, what the client trusts (curl --cacert, CAINFO)
  ca-key.pem        the CA's private key (0600), kept to sign client certificates later
  server.pem        the server certificate (SAN IP:127.0.0.1, DNS:localhost)
  server-key.pem    its private key (0600)

ensure_client_cert adds a TLS client certificate signed by the same CA (mutual TLS, RFC 8705)
and self_signed_cert a self-signed one.

The TLS keys are EC P-256 (generated in milliseconds); token signing keys are RSA because
the servers sign RS256.
"""

import base64
import ctypes
import datetime
import ipaddress
import os
import signal
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE = "ca.pem"
CA_KEY_FILE = "ca-key.pem"
CERT_FILE = "server.pem"
KEY_FILE = "server-key.pem"


def write_private(path: Path, data: bytes) -> None:
    """Writes a file only its owner can read, atomically (a reader never sees half of it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def ensure_tls(workdir: Path) -> tuple[Path, Path, Path]:
    """Returns (ca.pem, server.pem, server-key.pem) in workdir, creating them if missing."""
    ca_path, cert_path, key_path = workdir / CA_FILE, workdir / CERT_FILE, workdir / KEY_FILE
    if ca_path.exists() and cert_path.exists() and key_path.exists():
        return ca_path, cert_path, key_path

    now = datetime.datetime.now(datetime.timezone.utc)
    # Backdated a day so a clock a little behind does not make the certificates "not yet valid".
    not_before, not_after = now - datetime.timedelta(days=1), now + datetime.timedelta(days=3650)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "authgate test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    # The keys first and the CA last: a concurrent reader that sees ca.pem sees them all.
    write_private(workdir / CA_KEY_FILE, _pem_key(ca_key))
    write_private(key_path, _pem_key(key))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return ca_path, cert_path, key_path


def _validity() -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.timezone.utc)
    return now - datetime.timedelta(days=1), now + datetime.timedelta(days=3650)


def client_subject(common_name: str) -> x509.Name:
    """The subject of the client certificates below ("CN=<common_name>,O=authgate tests")."""
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "authgate tests"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _client_cert_builder(common_name: str, key) -> x509.CertificateBuilder:
    not_before, not_after = _validity()
    return (
        x509.CertificateBuilder()
        .subject_name(client_subject(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    )


def ensure_client_cert(workdir: Path, name: str = "client",
                       common_name: str = "authgate test client") -> tuple[Path, Path]:
    """Returns (NAME.pem, NAME-key.pem) in workdir: a TLS client certificate (EC P-256, extended
    key usage clientAuth, subject "CN=<common_name>,O=authgate tests") signed by the work
    directory's CA, created if missing. Needs the CA key, which ensure_tls keeps in ca-key.pem
    (a directory made before it did cannot get one: start from a fresh directory)."""
    cert_path, key_path = workdir / f"{name}.pem", workdir / f"{name}-key.pem"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    ca_path = ensure_tls(workdir)[0]
    ca_key_path = workdir / CA_KEY_FILE
    if not ca_key_path.exists():
        raise FileNotFoundError(f"{ca_key_path} is missing: {workdir} was made before the CA key was kept")
    ca_cert = x509.load_pem_x509_certificate(ca_path.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _client_cert_builder(common_name, key)
        .issuer_name(ca_cert.subject)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    write_private(key_path, _pem_key(key))  # the key first: a reader that sees the cert sees both
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def self_signed_cert(workdir: Path, name: str, common_name: str) -> tuple[Path, Path]:
    """Returns (NAME.pem, NAME-key.pem) in workdir: a self-signed TLS client certificate (EC P-256,
    subject "CN=<common_name>,O=authgate tests"), created if missing."""
    cert_path, key_path = workdir / f"{name}.pem", workdir / f"{name}-key.pem"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _client_cert_builder(common_name, key)
        .issuer_name(client_subject(common_name))
        .sign(key, hashes.SHA256())
    )
    write_private(key_path, _pem_key(key))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def ensure_rsa_key(path: Path) -> rsa.RSAPrivateKey:
    """Loads the RSA signing key at path, generating (and saving) it the first time."""
    if path.exists():
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_private(path, _pem_key(key))
    return key


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rsa_public_jwk(key: rsa.RSAPrivateKey, kid: str) -> dict:
    """The public half of key as a JWK (RFC 7517) for a JWKS document."""
    numbers = key.public_key().public_numbers()
    to_bytes = lambda n: n.to_bytes((n.bit_length() + 7) // 8, "big")  # noqa: E731
    return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
            "n": b64url(to_bytes(numbers.n)), "e": b64url(to_bytes(numbers.e))}


def die_with_parent(parent_pid: int, sig: int = signal.SIGINT) -> None:
    """Asks Linux to send sig to this process when its parent dies (PR_SET_PDEATHSIG), so a
    killed launcher does not leave gunicorn behind. For a preexec_fn of a single-threaded
    parent only: the signal comes when the *thread* that forked exits."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def unblock_stop_signals() -> None:
    """Unblocks SIGTERM and SIGINT, which a parent may have left blocked in the mask we
    inherited (the Swift test runner does). A blocked SIGTERM never reaches Python's handler,
    so the server would ignore its stop signal, and gunicorn, which inherits the mask, its
    parent-death signal."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
