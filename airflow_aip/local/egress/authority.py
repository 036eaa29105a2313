"""A certificate authority of the service's own, so a trainer's HTTPS to Google's hosts ends here.

TensorFlow's ``gs://`` file system calls ``https://storage.googleapis.com`` and
``https://www.googleapis.com/storage/v1`` by fixed names: unlike google-cloud-storage it reads no
emulator variable. It does read ``https_proxy`` (its libcurl is built with proxies on Linux:
tensorflow ``third_party/curl.BUILD``) and ``CURL_CA_BUNDLE`` (``curl_http_request.cc``). So
the service proxies a replica's HTTPS, and answers for Google's names with a certificate this
authority signs; the replica's bundle is the public roots plus this one root, so every other
host still verifies as it would on Vertex.

One authority per data dir, kept there (``authority/``, the keys readable by their owner only):
Google's own clients outside any job (Airflow's processes, through ``aip-local env``) trust its
root by a file they read once per process (gRPC's roots are computed once), so a restart of the
service must not change the root under a running Airflow. Without a directory (a test of the
authority alone) it lives in memory. EC P-256 keys: made in a millisecond, accepted by OpenSSL
and BoringSSL alike. The root lasts five years, the leaf one; a leaf with less than 30 days
left is made anew under the same root at the next start.
"""

from __future__ import annotations

import datetime
import functools
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The names a trainer's Google calls use: the API hosts and the public object host.
GOOGLE_NAMES = ("googleapis.com", "*.googleapis.com")
_ROOT_VALID = datetime.timedelta(days=5 * 365)
_LEAF_VALID = datetime.timedelta(days=365)
_RENEW_BEFORE = datetime.timedelta(days=30)
_PEM = serialization.Encoding.PEM


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
        # Whole files only (renamed into place): a process starting meanwhile reads the old bundle
        # or the new one, never half of one.
        _write_private(bundle, _public_roots() + b"\n" + self.root_pem, mode=0o644)
        _write_private(leaf, self.leaf_pem + self.root_pem, mode=0o644)
        _write_private(key, self.leaf_key_pem)
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


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _new_root(now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    root_key = ec.generate_private_key(ec.SECP256R1())
    root_name = _name("aip-local root for Google's names")
    root = (
        x509.CertificateBuilder()
        .subject_name(root_name)
        .issuer_name(root_name)
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _ROOT_VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        # Good for Google's API names only: a process that trusts this root (Airflow's, through
        # SSL_CERT_FILE) trusts nothing else it might sign, even if its key, kept on disk, leaked.
        .add_extension(x509.NameConstraints([x509.DNSName(GOOGLE_NAMES[0])], None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()), critical=False)
        .sign(root_key, hashes.SHA256())
    )
    return root, root_key


def _new_leaf(
    root: x509.Certificate, root_key: ec.EllipticCurvePrivateKey, now: datetime.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(GOOGLE_NAMES[1]))
        .issuer_name(root.subject)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(min(now + _LEAF_VALID, root.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in GOOGLE_NAMES]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(root_key.public_key()), critical=False
        )
        .sign(root_key, hashes.SHA256())
    )
    return leaf, leaf_key


def _fresh(certificate: x509.Certificate, now: datetime.datetime) -> bool:
    return certificate.not_valid_after_utc - now > _RENEW_BEFORE


def _write_private(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Written whole (a new file renamed over the old); by default readable by its owner only."""
    part = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    part.unlink(missing_ok=True)
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(part, path)


def _kept_root(
    folder: Path, now: datetime.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """The root kept in ``folder``, if it is whole and has more than 30 days left."""
    try:
        root = x509.load_pem_x509_certificate((folder / "root.pem").read_bytes())
        key = serialization.load_pem_private_key((folder / "root.key").read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not _fresh(root, now):
        return None
    return root, key


def _kept_leaf(folder: Path, root: x509.Certificate, now: datetime.datetime) -> tuple[bytes, bytes] | None:
    try:
        leaf_pem, key_pem = (folder / "leaf.pem").read_bytes(), (folder / "leaf.key").read_bytes()
        leaf = x509.load_pem_x509_certificate(leaf_pem)
    except (OSError, ValueError):
        return None
    if leaf.issuer != root.subject or not _fresh(leaf, now):
        return None
    return leaf_pem, key_pem


@functools.cache
def authority(directory: Path | None = None) -> Authority:
    """The authority kept in ``directory/authority`` (made there on first use, and kept across
    restarts), or, without a directory, one in this process's memory."""
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    folder = directory / "authority" if directory is not None else None
    kept = _kept_root(folder, now) if folder is not None else None
    root, root_key = kept or _new_root(now)
    if folder is not None and kept is None:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_private(folder / "root.key", _key_pem(root_key))
        _write_private(folder / "root.pem", root.public_bytes(_PEM))
    leaf_pems = _kept_leaf(folder, root, now) if folder is not None and kept is not None else None
    if leaf_pems is None:
        leaf, leaf_key = _new_leaf(root, root_key, now)
        leaf_pems = leaf.public_bytes(_PEM), _key_pem(leaf_key)
        if folder is not None:
            _write_private(folder / "leaf.key", leaf_pems[1])
            _write_private(folder / "leaf.pem", leaf_pems[0])
    return Authority(root.public_bytes(_PEM), leaf_pems[0], leaf_pems[1])
