"""The client proxy's rules, on a real proxy on loopback: Vertex AI's names, tokens, refusals, the CA kept."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from airflow_aip.local.cli import main
from airflow_aip.local.cli_env import exports, key_file, write_record
from airflow_aip.local.egress.authority import authority
from airflow_aip.local.egress.clients import ClientProxy, Upstreams
from airflow_aip.local.egress.routes import is_vertex_host
from tests.fixtures.tools import missing


@pytest.mark.parametrize(
    ("host", "vertex"),
    [
        ("us-central1-aiplatform.googleapis.com", True),
        ("europe-west4-aiplatform.googleapis.com", True),
        ("aiplatform.googleapis.com", True),
        ("us-central1-aiplatform.mtls.googleapis.com", False),
        ("notaiplatform.googleapis.com", False),
        ("aiplatform.googleapis.com.example.org", False),
    ],
)
def test_vertex_ai_hosts_are_the_global_and_regional_names(host: str, vertex: bool) -> None:
    assert is_vertex_host(host) is vertex


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[ClientProxy]:
    upstreams = Upstreams(("127.0.0.1", 9), ("127.0.0.1", 9), None)  # nothing behind: not needed here
    with ClientProxy(("127.0.0.1", 0), upstreams, tmp_path / "egress") as started:
        yield started


def _connect(proxy: ClientProxy, target: str) -> bytes:
    host, port = proxy.host.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        return sock.recv(4096)


def test_a_token_request_is_answered_here_under_the_service_root(proxy: ClientProxy) -> None:
    with httpx.Client(proxy=proxy.url, verify=ssl.create_default_context(cafile=proxy.roots)) as client:
        answer = client.post(
            "https://oauth2.googleapis.com/token", data={"grant_type": "refresh_token", "refresh_token": "x"}
        )

    assert answer.status_code == 200
    assert answer.json()["access_token"].startswith("aip-local.")
    assert answer.json()["token_type"] == "Bearer"


def test_google_s_other_hosts_are_refused_and_other_verbs_too(proxy: ClientProxy) -> None:
    assert _connect(proxy, "bigquery.googleapis.com:443").startswith(
        b"HTTP/1.1 403 aip-local refuses bigquery"
    )
    assert _connect(proxy, "storage.googleapis.com:443").startswith(
        b"HTTP/1.1 403 aip-local has no Cloud Storage"
    )


def _own_address() -> str:
    """An address of this machine's that is not loopback (the route a packet to TEST-NET-1 takes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError as exc:
            missing("a network interface besides loopback", "a machine with one", str(exc))
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        missing("a network interface besides loopback", "a machine with one", address)
    return address


def test_a_client_from_another_address_is_refused_unless_allowed(tmp_path: Path) -> None:
    upstreams = Upstreams(("127.0.0.1", 9), ("127.0.0.1", 9), None)
    address = _own_address()
    with ClientProxy(("0.0.0.0", 0), upstreams, tmp_path / "egress") as proxy:
        port = int(proxy.host.rsplit(":", 1)[1])
        with socket.create_connection((address, port), timeout=10) as sock:
            sock.sendall(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n")
            answer = sock.recv(4096)

    assert answer.startswith(b"HTTP/1.1 403 aip-local's client proxy serves this machine only")


def test_the_authority_outlives_a_restart_of_the_service(tmp_path: Path) -> None:
    first = authority(tmp_path)
    authority.cache_clear()  # what a new service process starts with

    again = authority(tmp_path)

    assert again.root_pem == first.root_pem
    assert (tmp_path / "authority" / "root.key").stat().st_mode & 0o077 == 0


def test_env_prints_the_recorded_variables_and_a_key_of_the_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["env", "--data-dir", str(tmp_path)]) == 1  # no service has written its record yet
    assert "aip-local serve --data-dir" in capsys.readouterr().err
    values = {
        "proxy": "http://127.0.0.1:8767",
        "roots": "/r.pem",
        "storage": "",
        "api": "http://a/",
        "grpc": "g:1",
    }
    write_record(tmp_path, values)

    assert main(["env", "--data-dir", str(tmp_path), "--project", "p1"]) == 0

    printed = capsys.readouterr().out.splitlines()
    assert "export grpc_proxy=http://127.0.0.1:8767" in printed
    assert "export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=/r.pem" in printed
    assert f"export GOOGLE_APPLICATION_CREDENTIALS={tmp_path / 'client' / 'key-p1.json'}" in printed
    assert not any(line.startswith("export STORAGE_EMULATOR_HOST") for line in printed)
    assert '"project_id": "p1"' in key_file(tmp_path, "p1").read_text()
    assert all(
        name != "GOOGLE_APPLICATION_CREDENTIALS" for name, _ in exports(values, None)
    )  # --keep-credentials


def _leaf_for(name: str, folder: Path) -> tuple[Path, Path]:
    """A leaf for ``name`` signed by the kept root's own key (as a thief of that key would)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    root = x509.load_pem_x509_certificate((folder / "root.pem").read_bytes())
    root_key = serialization.load_pem_private_key((folder / "root.key").read_bytes(), password=None)
    assert isinstance(root_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(root.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(root_key, hashes.SHA256())
    )
    chain, key_file = folder / f"{name}.pem", folder / f"{name}.key"
    chain.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return chain, key_file


@pytest.mark.parametrize(("name", "trusted"), [("storage.googleapis.com", True), ("pypi.org", False)])
def test_the_root_vouches_for_google_s_api_names_only(tmp_path: Path, name: str, trusted: bool) -> None:
    bundle, _, _ = authority(tmp_path).write(tmp_path)
    chain, key = _leaf_for(name, tmp_path / "authority")
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(chain, key)
    client_side = ssl.create_default_context(cafile=str(bundle))
    left, right = socket.socketpair()
    with left, right:
        serving = threading.Thread(target=_accept, args=(server_side, right), daemon=True)
        serving.start()
        try:
            with client_side.wrap_socket(left, server_hostname=name):
                verified = True
        except ssl.SSLCertVerificationError:
            verified = False
        serving.join(10)

    assert verified is trusted


def _accept(context: ssl.SSLContext, sock: socket.socket) -> None:
    with contextlib.suppress(OSError, ssl.SSLError):  # the client refused it: what one test wants
        context.wrap_socket(sock, server_side=True).close()
