"""``aip-local env``: the variables that send Google's own clients, unchanged, to a local service.

``aip-local serve`` writes what its clients need to know to ``<data dir>/client/env.json`` (its
client proxy, the roots file, the Cloud Storage emulator, its REST and gRPC endpoints);
``aip-local env --data-dir DIR`` prints them as ``export NAME=value`` lines, for a shell
(``eval "$(aip-local env --data-dir DIR)"``), a DAG test, or Airflow's processes:

- ``grpc_proxy``, ``https_proxy`` (lower case: gRPC's core reads no other spelling) and
  ``HTTPS_PROXY``: the client proxy (:mod:`airflow_aip.local.egress.clients`); ``no_proxy``
  keeps loopback direct;
- ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``, ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``,
  ``CURL_CA_BUNDLE``: one roots file, the public roots and the service's root (kept in the data
  dir, so a restarted service keeps it: gRPC reads its roots once per process);
- ``GOOGLE_APPLICATION_CREDENTIALS``: a service account key of the data dir's own (made here, for
  ``--project``), so ADC works with no login and names the project Google's SDK defaults to. Its
  token requests go to the proxy, which answers them; gapic clients sign their own JWTs with it
  and ask nothing. (Not ``GOOGLE_CLOUD_PROJECT``: with it, Google's SDK first asks Resource
  Manager to turn the value into a project ID, which the service does not serve: a minute of
  retries.)
- ``STORAGE_EMULATOR_HOST`` and the ``CLOUDSDK_API_ENDPOINT_OVERRIDES_*`` our own operators and
  ``aip-local serve`` already print.

The proxy's port is fixed by default (``--proxy-port``), so these lines stay true across restarts.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_aip.local.egress.clients import ClientProxy

NO_PROXY = "127.0.0.1,localhost,::1"
DEFAULT_PROXY_PORT = 8767
DEFAULT_PROJECT = "local-project"
_RECORD = Path("client") / "env.json"
_TRUST = ("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE")


def add_env_arguments(env: argparse.ArgumentParser, default_data_dir: Path) -> None:
    env.add_argument("--data-dir", type=Path, default=default_data_dir, help="the data dir serve was given")
    env.add_argument(
        "--project",
        default=DEFAULT_PROJECT,
        help="the project of the key file ADC finds, which Google's SDK defaults to "
        f"(default {DEFAULT_PROJECT})",
    )
    env.add_argument(
        "--keep-credentials",
        action="store_true",
        help="leave GOOGLE_APPLICATION_CREDENTIALS out (your key file or ADC is used; its token "
        "requests are answered locally all the same)",
    )


def write_record(data_dir: Path, values: dict[str, str]) -> Path:
    """What ``aip-local env`` prints, as ``serve`` knows it."""
    record = data_dir / _RECORD
    record.parent.mkdir(parents=True, exist_ok=True)
    part = record.with_suffix(".part")
    part.write_text(json.dumps(values, indent=2) + "\n", encoding="utf-8")
    part.replace(record)
    return record


def key_file(data_dir: Path, project: str) -> Path:
    """A service account key file for ``project``, made once in the data dir (mode 0600): its key
    signs only what the local service reads, and its token URI is answered by the client proxy."""
    path = data_dir / _RECORD.parent / f"key-{project}.json"
    if path.is_file():
        return path
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    account = f"aip-local@{project}.iam.gserviceaccount.com"
    content = {
        "type": "service_account",
        "project_id": project,
        "private_key_id": secrets.token_hex(20),
        "private_key": pem.decode(),
        "client_email": account,
        "client_id": str(10**20 + secrets.randbelow(9 * 10**20)),
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(content, out, indent=2)
    os.replace(part, path)
    return path


def read_record(data_dir: Path) -> dict[str, Any]:
    path = data_dir / _RECORD
    try:
        found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(
            f"no {path}: start `aip-local serve --data-dir {data_dir}` first ({exc})"
        ) from exc
    return found


def exports(record: dict[str, Any], credentials: Path | None) -> list[tuple[str, str]]:
    """The ``(name, value)`` pairs, in the order they are printed."""
    proxy, roots, api = record["proxy"], record["roots"], record["api"]
    pairs = [("grpc_proxy", proxy), ("https_proxy", proxy), ("HTTPS_PROXY", proxy)]
    pairs += [("no_proxy", NO_PROXY), ("NO_PROXY", NO_PROXY)]
    pairs += [(name, roots) for name in _TRUST]
    if credentials is not None:
        pairs.append(("GOOGLE_APPLICATION_CREDENTIALS", str(credentials)))
    if record.get("storage"):
        pairs.append(("STORAGE_EMULATOR_HOST", record["storage"]))
    pairs += [
        (f"CLOUDSDK_API_ENDPOINT_OVERRIDES_{api_name}", api) for api_name in ("ML", "AIPLATFORM", "LOGGING")
    ]
    pairs.append(("AIP_LOCAL_GRPC_ENDPOINT", record["grpc"]))
    return pairs


def print_env(args: argparse.Namespace) -> int:
    data_dir = args.data_dir.expanduser().resolve()
    record = read_record(data_dir)
    credentials = None if args.keep_credentials else key_file(data_dir, args.project)
    for name, value in exports(record, credentials):
        print(f"export {name}={shlex.quote(str(value))}")
    return 0


def start_client_proxy(
    args: argparse.Namespace, data_dir: Path, port: int, grpc_port: int, storage_url: str
) -> ClientProxy:
    """The client proxy for Google's own clients, started, and what ``aip-local env`` prints, recorded."""
    from airflow_aip.local.egress.clients import ClientProxy, Upstreams
    from airflow_aip.local.egress.front import storage_front

    egress = data_dir / "egress"
    front = storage_front(storage_url, egress) if storage_url else None
    upstreams = Upstreams((args.host, grpc_port), (args.host, port), front.address if front else None)
    try:
        proxy = ClientProxy((args.host, args.proxy_port), upstreams, egress, allow_remote=args.allow_remote)
    except OSError as exc:
        if args.proxy_port != DEFAULT_PROXY_PORT:
            raise
        # Another service (another data dir) has the default port: this one gets any free port,
        # which its `aip-local env` names; a restart may then move it.
        print(
            f"# the client proxy's port {DEFAULT_PROXY_PORT} is taken ({exc}): any free port", file=sys.stderr
        )
        proxy = ClientProxy((args.host, 0), upstreams, egress, allow_remote=args.allow_remote)
    proxy.start()
    values = {
        "proxy": proxy.url,
        "roots": str(proxy.roots),
        "storage": storage_url,
        "api": f"http://{args.host}:{port}/",
        "grpc": f"{args.host}:{grpc_port}",
    }
    write_record(data_dir, values)
    return proxy
