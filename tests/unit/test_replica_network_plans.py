"""A container job's replicas as hosts of their own, and the pools the service does not run.

Google's Reduction Server pool (``us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver``)
is an image only Google's registry serves: the plan skips it, and the job's log says so. A job whose
every pool is a container gets a network of its own; one that mixes processes keeps the host's.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

from airflow_aip.local.executor.containers import ContainerEngine, store_key
from airflow_aip.local.executor.plans import REDUCTION_SERVER, reduction_server, vertex_plan
from airflow_aip.local.executor.replica_network import ReplicaNetwork, networked, shared_network_note
from tests.fixtures.job_records import vertex_record

MACHINE = {"machineType": "n1-standard-4"}


def _pool(image: str, count: int = 1) -> dict[str, Any]:
    return {"machineSpec": MACHINE, "replicaCount": str(count), "containerSpec": {"imageUri": image}}


def test_a_reduction_server_pool_is_skipped_and_the_log_says_so() -> None:
    trainer = "localhost/trainer:1"
    plan = vertex_plan(
        vertex_record(_pool(trainer), _pool(trainer, 2), _pool(f"{REDUCTION_SERVER}:latest", 4))
    )
    assert [p.cluster_key for p in plan.pools] == ["workerpool0", "workerpool1"]
    assert plan.images == (trainer,)  # nothing to pull from Google's restricted registry
    [note] = plan.notes
    assert note.startswith(f"workerpool2 runs Google's Reduction Server ({REDUCTION_SERVER}:latest): not run")


def test_only_googles_reduction_server_image_is_one() -> None:
    assert reduction_server(f"{REDUCTION_SERVER}@sha256:{'0' * 64}")
    assert reduction_server(REDUCTION_SERVER)
    assert not reduction_server("us-docker.pkg.dev/my-project/training/reductionserver:latest")
    assert not reduction_server("")


def test_a_network_of_its_own_only_when_every_pool_is_a_container(tmp_path: Path) -> None:
    engine = ContainerEngine("/usr/bin/podman", store_key(tmp_path))
    containers = vertex_plan(vertex_record(_pool("localhost/trainer:1"), _pool("localhost/trainer:1", 2)))
    image = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"
    package = {"executorImageUri": image, "packageUris": ["gs://b/t.tar.gz"], "pythonModule": "t.task"}
    mixed = vertex_plan(
        vertex_record(_pool("localhost/trainer:1"), {"replicaCount": "1", "pythonPackageSpec": package})
    )
    assert networked(containers.pools, engine)
    assert not networked(mixed.pools, engine)
    assert not networked(containers.pools, None)
    # The job's log says so when containers keep the host's network, and only then.
    assert "fixed port (2222) held by two replicas collides" in (
        shared_network_note(mixed.pools, engine) or ""
    )
    assert shared_network_note(containers.pools, engine) is None


class _Engine(ContainerEngine):
    """The engine's CLI answered here (a network whose gateway is 127.0.0.2, on this machine)."""

    def network_command(self, *argv: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv[0])
        return subprocess.CompletedProcess(argv, 0, "127.0.0.2 " if argv[0] == "inspect" else "", "")

    @property
    def calls(self) -> list[str]:
        calls: list[str] = self.__dict__.setdefault("_calls", [])  # the dataclass is frozen
        return calls


def test_loopback_services_are_relayed_at_the_gateway_and_a_next_attempt_gets_the_port_again(
    tmp_path: Path,
) -> None:
    engine = _Engine("/usr/bin/podman", store_key(tmp_path))
    pools = vertex_plan(vertex_record(_pool("localhost/trainer:1", 2))).pools
    with socket.create_server(("127.0.0.1", 0)) as service:
        port = service.getsockname()[1]
        service.settimeout(5)
        env = {"GCE_METADATA_HOST": f"127.0.0.1:{port}", "no_proxy": "127.0.0.1,localhost,::1"}
        for trial in ("1", "2"):  # the second attempt's network has the same gateway, at once
            network = ReplicaNetwork(engine, "p/j", trial, pools)
            assert network.run_flags("workerpool0-1")[:6] == [
                "--network",
                network.name,
                "--ip",
                "127.0.0.4",
                "--hostname",
                "workerpool0-1",
            ]
            assert network.hosts == {"workerpool0": ["workerpool0-0:2222", "workerpool0-1:2222"]}
            seen = network.replica_env(env)
            assert seen == {
                "GCE_METADATA_HOST": f"127.0.0.2:{port}",
                "no_proxy": "127.0.0.1,localhost,::1,127.0.0.2",
            }
            with socket.create_connection(("127.0.0.2", port), timeout=5) as replica:
                accepted, _ = service.accept()
                with accepted:
                    replica.sendall(b"ping")
                    assert accepted.recv(4) == b"ping"
            network.remove()
    assert engine.calls == ["create", "inspect", "rm"] * 2
