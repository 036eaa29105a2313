"""A package pool in its real pre-built image when the container engine has it, as ``gcloud local-run`` does.

On Vertex AI a ``pythonPackageSpec`` replica runs in the container its ``executorImageUri``
names: the image's entrypoint pip-installs the pool's ``packageUris`` (``--user``, into
``/root/.local``) and runs ``python -m <pythonModule> <args>``. Google's own
``gcloud ai custom-jobs local-run`` pulls that image into Docker and does the same. Here, when
the service has a container engine (``--container-engine``) and the image can be had, the pool
is rewritten into a container pool (:mod:`.containers`, the run path of a custom container:
host network, the replica's variables, ``/tmp/hypertune``, ``/gcs/``, the proxy's CA, labels,
removal) whose command is that entrypoint's: the downloaded packages are bound read-only at
:data:`PACKAGES_MOUNT`. Otherwise the pool runs in the uv environment (:mod:`.environments`),
the fallback; the job's log says which path ran and why.

``aip-local serve --prebuilt-images`` chooses how an image is had:

- ``present`` (default): only an image the engine already holds (pulled or tagged beforehand)
  is run; nothing is pulled, so a laptop never downloads a multi-GB TensorFlow image on its first
  job, and a machine with no registry access pays nothing;
- ``pull``: a missing image is pulled, as local-run does; a failed pull is remembered by the
  service process (one failed pull per image, not one per job) and the pool falls back;
- ``never``: always the uv environment (so is ``--offline``: the image's pip would need an index,
  to build the sdist at least, where uv's cache serves the environment).

A pull that fails is a fallback, never a job failure: a pre-built image is Google's, and the job
does not depend on this machine reaching its registry.
"""

from __future__ import annotations

import dataclasses
import shlex
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_aip.local.executor.containers import ContainerEngine, ImagePullError
from airflow_aip.local.executor.plans import ExecutionPlan, PoolPlan

POLICIES = ("present", "pull", "never")
DEFAULT_POLICY = "present"
PACKAGES_MOUNT = "/opt/aip-local/packages"
PULL_TIMEOUT = 3600.0  # a pre-built image is GBs: an hour, then the pool falls back


@dataclass(frozen=True)
class Choice:
    """Whether a pool runs in its image, and the reason the job's log gives."""

    in_image: bool
    why: str


class PrebuiltImages:
    """Which pre-built images this service's engine can run, remembering those it could not pull."""

    def __init__(
        self, engine: ContainerEngine | None, policy: str = DEFAULT_POLICY, *, offline: bool = False
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        self.engine = engine
        self.policy = policy
        self.offline = offline  # --offline: pip in the image would need the index the uv cache spares
        self._unavailable: dict[str, str] = {}  # image -> why its pull failed, for this process
        self._lock = threading.Lock()  # one pull at a time: two jobs never both pull an image

    def choose(self, image: str) -> Choice:
        """Run in ``image``, or not and why; pulls it under ``pull`` unless that failed before."""
        engine = self.engine
        if self.policy == "never":
            return Choice(False, "aip-local serve --prebuilt-images never")
        if engine is None:
            return Choice(False, "the service has no container engine (--container-engine)")
        if self.offline:
            return Choice(False, "aip-local serve --offline: pip in the image would need a package index")
        if engine.has_image(image):
            return Choice(True, f"{engine.name} has the image")
        if self.policy == "present":
            return Choice(
                False,
                f"{engine.name} has no such image and --prebuilt-images present pulls none "
                f"({engine.name} pull it, or serve with --prebuilt-images pull)",
            )
        with self._lock:
            if image in self._unavailable:
                return Choice(False, f"its pull failed earlier in this service: {self._unavailable[image]}")
            try:
                engine.pull(image, PULL_TIMEOUT)
            except ImagePullError as exc:
                self._unavailable[image] = str(exc)
                return Choice(False, f"{engine.name} could not pull it: {exc}")
        return Choice(True, f"{engine.name} pulled the image")


def entrypoint(packages: Sequence[str]) -> tuple[str, ...]:
    """The pre-built image's entrypoint, as a command: pip-install ``packages``, then run the module.

    The module and its arguments follow as ``$@`` (``python -m <module> <args>``). The image's
    ``python3`` (its ``python`` if it has no ``python3``) does both.
    """
    install = " ".join(shlex.quote(p) for p in packages)
    script = (
        'PY="$(command -v python3 || command -v python)" && '
        f'"$PY" -m pip install --user --quiet --no-warn-script-location {install} && '
        'exec "$PY" -m "$@"'
    )
    return ("sh", "-c", script, "sh")


def in_image(pool: PoolPlan, downloaded: Mapping[str, Path], packages_dir: Path) -> PoolPlan:
    """``pool`` as a container pool of its ``executorImageUri``, its packages bound from ``packages_dir``."""
    inside = [f"{PACKAGES_MOUNT}/{downloaded[u].relative_to(packages_dir)}" for u in pool.package_uris]
    return dataclasses.replace(
        pool,
        image_uri=pool.executor_image,
        command=entrypoint(inside),
        args=(pool.python_module, *pool.args),
        mounts=(*pool.mounts, (str(packages_dir), f"{PACKAGES_MOUNT}:ro")),
    )


def choose_paths(
    plan: ExecutionPlan, prebuilt: PrebuiltImages | None, downloaded: Mapping[str, Path], packages_dir: Path
) -> tuple[ExecutionPlan, list[str]]:
    """Each package pool in its pre-built image, or left to its environment; the log's line for each."""
    pools, notes = [], []
    for pool in plan.pools:
        image = pool.executor_image
        if pool.image_uri or not pool.python_module:
            pools.append(pool)
            continue
        if not image:  # ml v1: a runtimeVersion, no image anyone can run
            notes.append(
                f"Pool {pool.cluster_key} runs in a virtual environment: AI Platform's runtimeVersion "
                "names no image that can be run here"
            )
            pools.append(pool)
            continue
        choice = prebuilt.choose(image) if prebuilt else Choice(False, "the service runs no pre-built images")
        if choice.in_image:
            notes.append(f"Pool {pool.cluster_key} runs in its pre-built image {image} ({choice.why})")
            pools.append(in_image(pool, downloaded, packages_dir))
        else:
            notes.append(
                f"Pool {pool.cluster_key} runs in a virtual environment, not in {image}: {choice.why}"
            )
            pools.append(pool)
    return dataclasses.replace(plan, pools=tuple(pools)), notes
