"""Replicas as OCI containers, on this machine's podman or docker, as Vertex AI runs a custom container.

A ``containerSpec`` pool (Vertex AI) or a ``masterConfig.imageUri`` job (ml v1, each role's own
``imageUri`` falling back to the master's) runs one container per replica:

- ``command`` replaces the image's entrypoint and ``args`` its command, as on Vertex; a trial's
  hyperparameters follow as ``--name=value``;
- when every pool is a container, a network of the attempt's own, each replica in its own
  namespace with its ``CLUSTER_SPEC`` name as hostname (:mod:`.replica_network`); otherwise host
  networking, each replica on its own loopback port from ``CLUSTER_SPEC``; either way each reaches
  the others, the job's metadata server and HTTPS proxy, and the Cloud Storage emulator, with the
  variables a process replica gets (passed by name, so none is shown in ``ps``);
- ``PYTHONPATH``: the Vertex AI SDK's redirection first, then the image's own (read from its
  config: :meth:`ContainerEngine.image_env`), never replacing it;
- the replica's private directory bound at the container's ``/tmp/hypertune``, where its metrics
  are read; ``/gcs/`` bound from the replica's mount namespace (:mod:`.gcs_mount`); the Vertex AI
  SDK's redirection (:mod:`airflow_aip.local.trainer_site`) and the proxy's CA bundle bound
  read-only;
- a name and labels (:data:`JOB_LABEL`, :data:`STORE_LABEL`): a stop removes the container, and a
  restarted service removes whatever its data dir's jobs left running
  (:meth:`ContainerEngine.remove_left_over`).

A ``pythonPackageSpec`` pool whose pre-built image the engine has runs the same way
(:mod:`.prebuilt`); a replica asking for GPUs gets the engine's flags for the GPUs it leased
(:mod:`.accelerators`), if it has any.

The image is pulled before RUNNING (:meth:`ContainerEngine.ensure_image`; a registry on loopback
over plain HTTP, as docker allows by default); one the engine cannot pull fails the job. The
sandbox this project grew up in caps rlimits, so every run asks for no more than the service has
(:func:`airflow_aip.engines.ulimits`; podman fails "error setting rlimit" otherwise).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_aip.engines import find_engine_binary, loopback_registry, ulimits

JOB_LABEL = "aip-local.job"  # <project>/<job id>
STORE_LABEL = "aip-local.store"  # a hash of the service's data dir: whose containers these are
SITE_MOUNT = "/opt/aip-local/trainer_site"
_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")
# A replica's variables that name this machine's paths, and what the container gets instead.
HOST_ONLY = frozenset({"TMPDIR", "CLOUD_ML_HP_METRIC_FILE", "CLOUDSDK_CONFIG"})
CA_VARIABLES = ("CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH")


class ImagePullError(RuntimeError):
    """The engine has not got the image and cannot pull it."""


def store_key(data_dir: Path) -> str:
    """The :data:`STORE_LABEL` value of a data dir: the same on every start of its service."""
    return hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class ContainerEngine:
    """One engine's CLI (``podman`` or ``docker``) and the data dir whose containers it runs."""

    binary: str
    store: str  # :func:`store_key`

    @property
    def name(self) -> str:
        return Path(self.binary).name

    @property
    def sees_callers_mounts(self) -> bool:
        """Whether a bind mount's source is looked up in the caller's mount namespace: podman's is
        (no daemon: the container is made by the CLI's children); docker's daemon sees its own."""
        return self.name == "podman"

    def gcs_unavailable(self) -> str | None:
        """Why this engine's containers get no ``/gcs/``, or None."""
        if self.sees_callers_mounts:
            return None
        return (
            f"/gcs/ is not mounted in the containers: {self.name}'s daemon cannot see a replica's own "
            "mount (podman can)"
        )

    def _run(self, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *argv], capture_output=True, text=True, timeout=timeout, check=False
        )

    def has_image(self, image: str) -> bool:
        """Whether the engine holds ``image`` already (no pull)."""
        return self._run("image", "inspect", image, timeout=60).returncode == 0

    def ensure_image(self, image: str) -> bool:
        """Pull ``image`` unless the engine has it; True if it was pulled. ImagePullError if it cannot be."""
        if self.has_image(image):
            return False
        self.pull(image)
        return True

    def pull(self, image: str, timeout: float = 600) -> None:
        """Pull ``image``; ImagePullError if it cannot be (one longer than ``timeout`` seconds is
        stopped: a pull that hangs must not hold the job)."""
        insecure = ["--tls-verify=false"] if self.name == "podman" and loopback_registry(image) else []
        try:
            done = self._run("pull", "--quiet", *insecure, image, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ImagePullError(f"{self.name} pull took longer than {timeout:g} s") from exc
        if done.returncode != 0:
            lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
            raise ImagePullError(lines[-1] if lines else f"{self.name} pull exited {done.returncode}")

    def container_name(self, project: str, job_id: str, task: str, trial: str | None) -> str:
        """A name unique on this machine: the data dir's key, the job, the replica and the trial."""
        parts = [f"aip-{self.store}", project, job_id, task, *([f"trial-{trial}"] if trial else [])]
        return _NAME_UNSAFE.sub("_", "-".join(parts))[:250]

    def run_argv(
        self,
        name: str,
        job: str,
        image: str,
        command: Sequence[str],
        args: Sequence[str],
        env_names: Sequence[str],
        mounts: Mapping[str, str],
        devices: Sequence[str] = (),
        network: Sequence[str] = (),
    ) -> list[str]:
        """``<engine> run`` of one replica; ``env_names`` take their values from the caller's environment;
        ``devices`` are the engine's flags passing GPUs (:mod:`.accelerators`) and holding the replica
        to its machine's memory and vCPUs (:mod:`.limits`); ``network`` the replica's own network and
        names (:mod:`.replica_network`; default: the host's network)."""
        networking = list(network) or ["--network", "host"]
        argv = [self.binary, "run", "--rm", "--pull=never", "--name", name, *networking, *ulimits()]
        argv += devices
        argv += ["--label", f"{JOB_LABEL}={job}", "--label", f"{STORE_LABEL}={self.store}"]
        for source, target in mounts.items():
            argv += ["--volume", f"{source}:{target}"]
        for variable in env_names:
            argv += ["--env", variable]
        if command:
            argv += ["--entrypoint", command[0], image, *command[1:]]
        else:
            argv.append(image)
        return [*argv, *args]

    def network_command(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """``<engine> network ...`` (a replica network's: :mod:`.replica_network`)."""
        return self._run("network", *argv, timeout=60)

    def image_env(self, image: str) -> dict[str, str]:
        """The image's own ``ENV`` (its config, read by ``image inspect``): what its entrypoint would see."""
        found = self._run("image", "inspect", "--format", "{{json .Config.Env}}", image, timeout=60)
        try:
            pairs = json.loads(found.stdout.strip() or "null") if found.returncode == 0 else None
        except ValueError:
            pairs = None
        return dict(str(p).partition("=")[::2] for p in pairs or [])

    def remove(self, name: str) -> None:
        """Stop (SIGTERM, then SIGKILL after 5 s) and remove one container, if it still exists."""
        self._run("stop", "--time", "5", name, timeout=60)
        self._run("rm", "--force", name, timeout=60)

    def remove_left_over(self) -> list[str]:
        """Remove every container of this data dir's jobs; the names of those that were there."""
        listed = self._run(
            "ps", "--all", "--filter", f"label={STORE_LABEL}={self.store}", "--format", "{{.Names}}"
        )
        names = [n for n in listed.stdout.split() if n]
        for name in names:
            self.remove(name)
        return names


def find_engine(choice: str, data_dir: Path) -> ContainerEngine | None:
    """The engine named by ``choice`` (``auto``: podman, then docker; ``none``: none) if it runs here."""
    binary = None if choice == "none" else find_engine_binary(choice)
    return None if binary is None else ContainerEngine(binary, store_key(data_dir))
