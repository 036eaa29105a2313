"""The gRPC face against the REST face: one unary call's latency, the same call, the same run.

Google's own gapic ``JobServiceClient`` makes every call, on the transport under test, against
one real ``aip-local serve`` (on one fake-gcs-server), so the only difference is the wire:

- gRPC in clear (HTTP/2 on the service's gRPC port), against the REST transport (JSON over
  HTTP/1.1 on the API port): ``get_custom_job`` of one job, and ``create_custom_job`` (a job the
  executor then fails at once: its package is not in the bucket);
- gRPC as Google's own clients reach it with ``aip-local env``'s variables (CONNECT through the
  client proxy, TLS ended there under the service's root), against the same REST call.

Calls alternate between the transports, so both see the same load; each sample is one call,
after a warm-up that opens the connections.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from airflow_aip.local.storage.gcs import FakeGcsServer
from bench.common import Figure, Series
from tests.fixtures.local_service import LocalService

TOPIC = "gRPC face"
PARENT = "projects/bench-project/locations/us-central1"
POOL = {
    "machine_spec": {"machine_type": "n1-standard-4"},
    "replica_count": 1,
    "python_package_spec": {
        "executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
        "package_uris": ["gs://aip-bench-missing/trainer-0.1.tar.gz"],
        "python_module": "trainer.task",
    },
}
GOAL = "<= 1x of REST"


def _clients(service: LocalService) -> dict[str, Any]:
    import grpc
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient
    from google.cloud.aiplatform_v1.services.job_service.transports.grpc import JobServiceGrpcTransport

    env = service.client_env()
    roots = Path(env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"]).read_bytes()
    proxied = grpc.secure_channel(
        "us-central1-aiplatform.googleapis.com:443",
        grpc.ssl_channel_credentials(root_certificates=roots),
        options=[("grpc.http_proxy", env["grpc_proxy"])],
    )
    rest = JobServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": service.url.rstrip("/")},
    )
    return {
        "rest": rest,
        "grpc": JobServiceClient(transport=JobServiceGrpcTransport(channel=service.grpc_channel())),
        "proxied": JobServiceClient(transport=JobServiceGrpcTransport(channel=proxied)),
    }


def _alternating(calls: Mapping[str, Callable[[], object]], samples: int) -> dict[str, list[float]]:
    timed: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(samples):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            timed[name].append(time.perf_counter() - start)
    return timed


def _figures(service: LocalService, samples: int) -> list[Figure]:
    clients = _clients(service)
    body = {"display_name": "bench-grpc", "job_spec": {"worker_pool_specs": [POOL]}}
    job = clients["rest"].create_custom_job(request={"parent": PARENT, "custom_job": body})
    gets = {name: (lambda c=client: c.get_custom_job(name=job.name)) for name, client in clients.items()}
    creates = {
        name: (lambda c=client: c.create_custom_job(request={"parent": PARENT, "custom_job": body}))
        for name, client in clients.items()
        if name != "proxied"
    }
    _alternating(gets, 5)  # warm-up: connections opened, handlers' caches filled
    got = _alternating(gets, samples)
    made = _alternating(creates, max(5, samples // 4))
    rest_get = Series("REST (same client, transport=rest)", got["rest"])
    rest_create = Series("REST (same client, transport=rest)", made["rest"])
    note = f"{samples} gets and {max(5, samples // 4)} creates a transport, alternating"
    return [
        Figure(TOPIC, "get_custom_job, gRPC in clear", "s", Series("gRPC", got["grpc"]), rest_get, GOAL),
        Figure(
            TOPIC,
            "create_custom_job, gRPC in clear",
            "s",
            Series("gRPC", made["grpc"]),
            rest_create,
            GOAL,
            notes=[note],
        ),
        Figure(
            TOPIC,
            "get_custom_job, gRPC through the client proxy (TLS, as aip-local env routes it)",
            "s",
            Series("gRPC proxied", got["proxied"]),
            rest_get,
            "",
        ),
    ]


def _with_goals(figures: list[Figure]) -> list[Figure]:
    for figure in figures:
        if figure.goal and figure.ratio is not None:
            figure.goal_met = figure.ratio <= 1.0
    return figures


def run(repeats: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="aip-bench-grpc-") as tmp:
        root = Path(tmp)
        with FakeGcsServer(root / "gcs") as gcs:
            service = LocalService(root / "data", gcs.url, max_running_jobs=1).start()
            try:
                return _with_goals(_figures(service, samples=max(20, repeats * 20)))
            finally:
                service.stop()
