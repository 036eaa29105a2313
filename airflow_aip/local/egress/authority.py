"""A certificate authority of the service's own, so a trainer's HTTPS to Google's hosts ends here.

TensorFlow's ``gs://`` file system calls ``https://storage.googleapis.com`` and
``https://www.googleapis.com/storage/v1`` by fixed names: unlike google-cloud-storage it reads no
emulator variable. It does read ``https_proxy`` (its libcurl is built with proxies on Linux:
tensorflow ``third_party/curl.BUILD``) and ``CURL_CA_BUNDLE`` (``curl_http_request.cc``). So
the service proxies a replica's HTTPS, and answers for Google's names with a certificate this
authority signs; the replica's bundle is the public roots plus this one root, so every other
host still verifies as it would on Vertex.

One authority per service process, in memory: its key never touches a disk that outlives the
process, and a root that was never written cannot be trusted by anything but this service's
replicas. EC P-256 keys: made in a millisecond, accepted by OpenSSL and BoringSSL alike.
"""

from __future__ import annotations

import datetime
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The names a trainer's Google calls use: the API hosts and the public object host.
GOOGLE_NAMES = ("googleapis.com", "*.googleapis.com")
_VALID = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Authority:
    """The root (PEM) and a leaf for :data:`GOOGLE_NAMES` with its key (PEM), all in memory."""

    root_pem: bytes
    leaf_pem: bytes
    leaf_key_pem: bytes

    def write(self, directory: Path) -> tuple[Path, Path, Path]:
        """``(bundle, leaf, key)`` files: the bundle is the public roots and then this root."""
        directory.mkdir(parents=True, exist_ok=True)
        bundle, leaf, key = directory / "ca-bundle.pem", directory / "leaf.pem", directory / "leaf.key"
        bundle.write_bytes(_public_roots() + b"\n" + self.root_pem)
        leaf.write_bytes(self.leaf_pem + self.root_pem)
        key.touch(mode=0o600)
        key.write_bytes(self.leaf_key_pem)
        return bundle, leaf, key


def _public_roots() -> bytes:
    """The roots a replica trusts anyway: certifi's (what requests uses), else the system's; then
    those the service's own environment names (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``). A machine
    behind a TLS-inspecting proxy names its root there: a replica's pip, in a container too, reaches
    PyPI through it as the service's uv does, as from a Vertex VM it reaches PyPI directly."""
    try:
        import certifi

        roots = Path(certifi.where()).read_bytes()
    except ImportError:  # pragma: no cover - certifi comes with requests, which google-auth needs
        roots = Path("/etc/ssl/certs/ca-certificates.crt").read_bytes()
    for variable in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        named = Path(os.environ.get(variable) or "/nonexistent")
        extra = named.read_bytes() if named.is_file() else b""
        if extra and extra not in roots:
            roots += b"\n" + extra
    return roots


def _name(common: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "aip-local"),
            x509.NameAttribute(NameOID.COMMON_NAME, common),
        ]
    )


@functools.cache
def authority() -> Authority:
    """This process's authority, made on first use."""
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    root_key = ec.generate_private_key(ec.SECP256R1())
    root_name = _name("aip-local root for trainers' Google calls")
    root = (
        x509.CertificateBuilder()
        .subject_name(root_name)
        .issuer_name(root_name)
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()), critical=False)
        .sign(root_key, hashes.SHA256())
    )
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(GOOGLE_NAMES[1]))
        .issuer_name(root_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALID)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in GOOGLE_NAMES]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(root_key.public_key()), critical=False
        )
        .sign(root_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return Authority(
        root.public_bytes(pem),
        leaf.public_bytes(pem),
        leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
