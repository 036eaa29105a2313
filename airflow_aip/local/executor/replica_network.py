"""A network per attempt of a custom-container job: each replica a host of its own, named as in CLUSTER_SPEC.

On Vertex AI each replica is a machine of its own: its hostname is its name in ``CLUSTER_SPEC``,
its ports are its own (every replica's sshd on 2222 for DeepSpeed and MPI), and the others reach
it by name. On one machine's host network the replicas would share one hostname and one loopback,
so locally, when every pool of a job runs in a container:

- the engine makes a bridge network for the attempt (``<engine> network create``, the subnet the
  engine's choice, labelled as the containers are, removed with them);
- each replica runs with ``--network`` it, an address of its own (the gateway's + 1 + its rank),
  ``--hostname workerpoolN-i`` (ml v1: ``master-replica-0``, ``worker-replica-0``, ...), and
  ``--add-host`` for every other replica: its own network namespace, so fixed in-image ports
  never collide;
- ``CLUSTER_SPEC``, ``TF_CONFIG`` and ``MASTER_ADDR``/``MASTER_PORT`` name ``<hostname>:2222``
  (:data:`CLUSTER_PORT`; [U] unverified: Vertex's own hostnames, which may carry a generated
  prefix or suffix, and that its port is 2222 in every pool);
- what a replica reaches on this machine's loopback (the job's metadata server and proxy, the
  Cloud Storage emulator, the service) it reaches at the gateway's address: its variables name the
  gateway instead of ``127.0.0.1``, and a relay per port listens there (bound before the bridge
  exists, with ``IP_FREEBIND``) and passes each connection on to loopback. Only the host and the
  network's own containers can reach the gateway's address.

A job mixing container pools and process pools keeps the host network (a process replica has no
hostname of its own to match): its replicas' names stay ``127.0.0.1:<port>``.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import re
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from airflow_aip.local.egress.tunnel import pipe
from airflow_aip.local.executor.containers import JOB_LABEL, STORE_LABEL, ContainerEngine
from airflow_aip.local.executor.plans import PoolPlan

CLUSTER_PORT = 2222
_IP_FREEBIND = 15  # linux/in.h: bind an address the host does not have yet (the bridge comes up later)
_LOOPBACK_PORT = re.compile(r"(?:127\.0\.0\.1|localhost):(\d+)")
_PROXY_EXCEPTIONS = ("no_proxy", "NO_PROXY")


def networked(pools: Sequence[PoolPlan], engine: ContainerEngine | None) -> bool:
    """Whether an attempt of ``pools`` gets a network of its own: every pool runs in a container."""
    return engine is not None and bool(pools) and all(p.image_uri for p in pools)


def shared_network_note(pools: Sequence[PoolPlan], engine: ContainerEngine | None) -> str | None:
    """The job's log line for a job whose containers keep the host's network (it mixes in processes)."""
    if engine is None or networked(pools, engine) or not any(p.image_uri for p in pools):
        return None
    return (
        "the job mixes container and process pools, so its replicas share this machine's network: "
        "each listens on its own loopback port from CLUSTER_SPEC, hostnames are this machine's, and a "
        "fixed port (2222) held by two replicas collides, unlike on Vertex AI"
    )


class ReplicaNetwork:
    """One attempt's network: made at construction, removed by :meth:`remove`."""

    def __init__(
        self, engine: ContainerEngine, job: str, trial: str | None, pools: Sequence[PoolPlan]
    ) -> None:
        self.engine = engine
        digest = hashlib.sha256(f"{job}/{trial or ''}".encode()).hexdigest()[:12]
        self.name = f"aip-{engine.store}-{digest}"
        self._relays: dict[int, socket.socket] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        made = engine.network_command(
            "create",
            "--label",
            f"{JOB_LABEL}={job}",
            "--label",
            f"{STORE_LABEL}={engine.store}",
            self.name,
        )
        if made.returncode != 0:
            raise RuntimeError(f"{engine.name} network create failed: {made.stderr.strip()}")
        self.gateway = self._gateway()
        base = ipaddress.ip_address(self.gateway)
        names = [p.task_name(i) for p in pools for i in range(p.count)]
        self.addresses = {name: str(base + 1 + rank) for rank, name in enumerate(names)}
        self.hosts = {
            p.cluster_key: [f"{p.task_name(i)}:{CLUSTER_PORT}" for i in range(p.count)] for p in pools
        }

    def _gateway(self) -> str:
        template = (
            "{{range .Subnets}}{{.Gateway}} {{end}}"
            if self.engine.name == "podman"
            else "{{range .IPAM.Config}}{{.Gateway}} {{end}}"
        )
        found = self.engine.network_command("inspect", "--format", template, self.name)
        gateways = [g for g in found.stdout.split() if g.count(".") == 3]
        if found.returncode != 0 or not gateways:
            self.remove()
            raise RuntimeError(f"{self.engine.name} network {self.name} has no IPv4 gateway: {found.stderr}")
        return gateways[0]

    def run_flags(self, task_name: str) -> list[str]:
        """The ``<engine> run`` flags of one replica: the network, its address, its name, the others'."""
        flags = ["--network", self.name, "--ip", self.addresses[task_name], "--hostname", task_name]
        for other, address in self.addresses.items():
            if other != task_name:
                flags += ["--add-host", f"{other}:{address}"]
        return flags

    def replica_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` as the replica in its namespace needs it: loopback addresses become the gateway's
        (each port relayed to loopback), and the gateway is not proxied."""
        out: dict[str, str] = {}
        for name, value in env.items():
            for port in _LOOPBACK_PORT.findall(value):
                self._relay(int(port))
            out[name] = _LOOPBACK_PORT.sub(lambda m: f"{self.gateway}:{m.group(1)}", value)
        for name in _PROXY_EXCEPTIONS:
            if name in out:
                out[name] = f"{out[name]},{self.gateway}"
        return out

    def _relay(self, port: int) -> None:
        with self._lock:
            if port in self._relays:
                return
            listener = _listen(self.gateway, port)
            if listener is None:  # bound on every address already (a service on 0.0.0.0): reachable as is
                return
            self._relays[port] = listener
            thread = threading.Thread(
                target=self._accept, args=(listener, port), daemon=True, name=f"relay-{port}"
            )
            self._threads.append(thread)
            thread.start()

    def _accept(self, listener: socket.socket, port: int) -> None:
        listener.settimeout(0.5)  # so a removed network's relay ends
        with listener:
            while not self._closed.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                client.settimeout(None)
                threading.Thread(target=_pass, args=(client, port), daemon=True).start()

    def remove(self) -> None:
        """Close the relays (their ports free again before this returns: the next attempt's network
        may get the same gateway) and remove the network (its containers are gone by then)."""
        self._closed.set()
        with self._lock:
            for listener in self._relays.values():
                with contextlib.suppress(OSError):
                    listener.shutdown(socket.SHUT_RDWR)  # wakes an accept() in progress
            threads, self._threads = self._threads, []
            self._relays.clear()
        for thread in threads:
            thread.join(timeout=5)
        self.engine.network_command("rm", "--force", self.name)


def _listen(address: str, port: int, patience: float = 5.0) -> socket.socket | None:
    """A listener on ``address:port`` (bound before the address exists: ``IP_FREEBIND``); None when
    the port stays taken on every address. A port just freed by the previous attempt's relay on the
    same gateway may take a moment."""
    deadline = time.monotonic() + patience
    while True:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_IP, _IP_FREEBIND, 1)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((address, port))
        except OSError:
            listener.close()
            if time.monotonic() > deadline or _wildcard_bound(port):
                return None
            time.sleep(0.05)
            continue
        listener.listen(64)
        return listener


def _wildcard_bound(port: int) -> bool:
    """Whether something listens on ``0.0.0.0:port`` (then every address reaches it already), as
    ``/proc/net/tcp`` lists it (state ``0A``: LISTEN)."""
    try:
        table = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    wanted = f"00000000:{port:04X}"
    return any(
        line.split()[1] == wanted and line.split()[3] == "0A" for line in table if len(line.split()) > 3
    )


def _pass(client: socket.socket, port: int) -> None:
    with client:
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            return
        with upstream:
            upstream.settimeout(None)
            pipe(client, upstream)


def remove_left_over_networks(engine: ContainerEngine) -> list[str]:
    """Remove the networks a killed service of this data dir left; their names."""
    listed = engine.network_command(
        "ls", "--filter", f"label={STORE_LABEL}={engine.store}", "--format", "{{.Name}}"
    )
    names = [n for n in listed.stdout.split() if n]
    for name in names:
        engine.network_command("rm", "--force", name)
    return names
