"""Fetch a job's packageUris and install them into a cached environment, as the container holds them.

On Vertex AI the trainer package is pip-installed into the pre-built container its
``executorImageUri`` names: that image's Python and framework, and nothing of ours. Each job here
gets the same (the *isolated* runtime, the default): a virtual environment on the image's
Python minor version (:mod:`.interpreters`; missing, the job fails unless the service allows the
mismatch), holding what the image ships: its framework and the Google and data libraries
(:mod:`airflow_aip.jobs.vertex.image_packages`), then the job's packages on top, both installed
by uv from the package registries (``offline``: from uv's cache only). An ml v1 job gets its
runtime version's packages the same way. A trainer that imports what its image ships but never
declared (``google.cloud.storage``) runs, as on Google; one that imports what no image ships
fails here as it would there, with ``ModuleNotFoundError``.

Where the container engine holds the image itself, the pool runs in it instead
(:mod:`.prebuilt`); an environment is the fallback. Each pool's environment holds its own
``packageUris`` only, as each Vertex pool installs its own: pools with the same list share one.

The *host* runtime (``aip-local serve --runtime host``) is the old, lenient one: a venv whose
``.pth`` adds the service's own site-packages, for machines with no package index at all.

Environments are keyed by the sha256 of what goes in (the runtime, the Python, the package files
in order), so a second job with the same packages starts at once. The image's own layer is kept
by the same kind of key in a cache shared by every service of this user, as uv's cache is
(``~/.cache/aip-local/images``, or ``$AIP_LOCAL_IMAGE_CACHE``): built once per machine, not once
per data directory, and hard-linked into each job's (:mod:`.builders`). A file lock per key
makes concurrent jobs wait for one build; a ``ready.json`` written last marks a complete
environment, so a build interrupted by a crash is discarded and redone.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.containers import Runtime, ml_runtime_of
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.executor.builders import (
    READY_FILE,
    PreparationError,
    build_host,
    build_image,
    build_isolated,
    compile_bytecode,
    runtime_python,
)
from airflow_aip.local.executor.processes import LineSink
from airflow_aip.local.store import safe_child
from airflow_aip.packaging import sha256_file
from airflow_aip.uris import parse_gcs_uri

RUNTIMES = ("isolated", "host")
IMAGE_CACHE_VARIABLE = "AIP_LOCAL_IMAGE_CACHE"
__all__ = [
    "READY_FILE",
    "RUNTIMES",
    "Environment",
    "EnvironmentCache",
    "PreparationError",
    "download_packages",
]


@dataclass(frozen=True)
class Environment:
    """A ready environment: run ``python -m <module>`` with ``python``; ``notes`` go to the job's log."""

    key: str
    path: Path
    python: Path
    cache_hit: bool
    notes: tuple[str, ...] = ()


def download_packages(uris: Sequence[str], dest: Path, storage_url: str | None) -> list[Path]:
    """Download each URI to ``dest/<index>/<object basename>`` (pip needs the real file name).

    The object name is untrusted: it must pass the GCS naming rules of :mod:`airflow_aip.uris`
    (no ``.``/``..`` segments, not absolute, no NUL), and only its last component is used as a
    file name inside ``dest``, checked again there.
    """
    from google.api_core import exceptions as gexc
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    if not storage_url:
        raise PreparationError("no Cloud Storage emulator configured (STORAGE_EMULATOR_HOST)")
    client = storage.Client(
        project="aip-local", credentials=AnonymousCredentials(), client_options={"api_endpoint": storage_url}
    )
    paths = []
    for index, uri in enumerate(uris):
        slot = dest / str(index)
        slot.mkdir(parents=True, exist_ok=True)
        try:
            parsed = parse_gcs_uri(uri, f"packageUris[{index}]", require_object=True)
            bucket, name = parsed.bucket, parsed.name
            target = safe_child(slot, name.rsplit("/", 1)[-1])
        except ValidationError as exc:
            raise PreparationError(f"packageUris[{index}]: unusable URI {uri!r}: {exc.rule}") from exc
        try:
            client.bucket(bucket).blob(name).download_to_filename(str(target))
        except gexc.NotFound as exc:
            target.unlink(missing_ok=True)
            raise PreparationError(f"packageUris[{index}]: {uri} does not exist") from exc
        except gexc.GoogleAPIError as exc:
            target.unlink(missing_ok=True)
            raise PreparationError(f"packageUris[{index}]: cannot download {uri}: {exc}") from exc
        paths.append(target)
    return paths


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write_ready(path: Path, ready: dict[str, object]) -> None:
    """``ready.json`` as a new file: a job's copy of the image holds the image's as a hard link,
    and writing into that link rewrote the image's own (its ``bytecode`` mark lost at each job)."""
    temporary = path / f"{READY_FILE}.tmp"
    temporary.write_text(json.dumps(ready, indent=1))
    os.replace(temporary, path / READY_FILE)


def default_image_cache() -> Path:
    """Where images' layers are kept: ``$AIP_LOCAL_IMAGE_CACHE``, else under the user's cache."""
    chosen = os.environ.get(IMAGE_CACHE_VARIABLE)
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aip-local" / "images"


def _digest(identity: object) -> str:
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]


class EnvironmentCache:
    """Environments under ``root``, one directory per key; ``runtime`` is ``isolated`` or ``host``.

    ``allow_python_mismatch`` (``aip-local serve --allow-python-mismatch``) runs a job whose image's
    Python this machine lacks on the service's, instead of failing it.
    """

    def __init__(
        self,
        root: Path,
        python: str = sys.executable,
        *,
        offline: bool = False,
        runtime: str = "isolated",
        allow_python_mismatch: bool = False,
        image_cache: Path | None = None,
    ) -> None:
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
        self.root = Path(root)
        self.python = python
        self.offline = offline
        self.runtime = runtime
        self.allow_python_mismatch = allow_python_mismatch
        self.image_cache = image_cache or default_image_cache()
        self.root.mkdir(parents=True, exist_ok=True)

    def key_for(self, digests: Sequence[str], python: Path, requirements: Sequence[str] = ()) -> str:
        identity = {
            "python": str(python.resolve()),
            "runtime": self.runtime,
            "requirements": list(requirements),
            # environments copied from an image layer before it was byte-compiled are not reused
            "bytecode": self.runtime == "isolated",
        }
        return _digest({"runtime": identity, "packages": list(digests), "offline": self.offline})

    def _image(
        self, python: Path, requirements: Sequence[str], log: LineSink, should_stop: Callable[[], bool]
    ) -> Path:
        """The image's layer (its Python and what it ships), built once and kept for every job."""
        identity = {
            "python": str(python.resolve()),
            "requirements": list(requirements),
            "offline": self.offline,
        }
        key = _digest(identity)
        images = self.image_cache
        images.mkdir(parents=True, exist_ok=True)
        path = images / key
        with _locked(images / f"{key}.lock"):
            ready_file = path / READY_FILE
            if not ready_file.exists():
                if path.exists():
                    shutil.rmtree(path)  # an earlier build that never finished
                build_image(path, python, requirements, log, should_stop, offline=self.offline)
                ready = {"created": rfc3339(), "python": str(python), "requirements": list(requirements)}
                _write_ready(path, dict(ready, bytecode=True))
            elif not json.loads(ready_file.read_text()).get("bytecode"):
                # kept by an earlier version, which compiled nothing: compiled once, here
                compile_bytecode(path, log, should_stop)
                _write_ready(path, dict(json.loads(ready_file.read_text()), bytecode=True))
        return path

    def _runtime(self, runtime: Runtime | None) -> tuple[Path, tuple[str, ...], list[str]]:
        """The interpreter, what the image ships, and the log's notes for ``runtime``."""
        if self.runtime == "host":
            notes = []
            if runtime is not None:
                notes.append(
                    f"executorImageUri {runtime.image} ({runtime.describe()}) is not reproduced: "
                    "aip-local serve --runtime host runs packages on the service's own Python and packages"
                )
            return Path(self.python), (), notes
        if runtime is None:  # an ml v1 job whose plan names no runtime version
            runtime = ml_runtime_of(None)
            libraries = ", ".join(runtime.requirements)
            notes = [
                "trainingInput.runtimeVersion is not reproduced: the job runs on the service's Python with "
                f"AI Platform's Google and data libraries ({libraries}; {runtime.source})"
            ]
            return Path(self.python), runtime.requirements, notes
        python, notes = runtime_python(runtime, Path(self.python), allow_mismatch=self.allow_python_mismatch)
        return python, runtime.requirements, notes

    def prepare(
        self,
        packages: Sequence[Path],
        log: LineSink,
        should_stop: Callable[[], bool],
        runtime: Runtime | None = None,
    ) -> Environment:
        """The environment for ``packages`` on ``runtime`` (None: an ml v1 job's, on the service's Python)."""
        python, requirements, notes = self._runtime(runtime)
        digests = [sha256_file(p) for p in packages]
        key = self.key_for(digests, python, requirements)
        path = self.root / key
        with _locked(self.root / f"{key}.lock"):
            hit = (path / READY_FILE).exists()
            if not hit:
                if path.exists():
                    shutil.rmtree(path)  # an earlier build that never finished
                if self.runtime == "host":
                    build_host(path, python, packages, log, should_stop, offline=self.offline)
                else:
                    image = self._image(python, requirements, log, should_stop)
                    build_isolated(path, image, packages, log, should_stop, offline=self.offline)
                ready = {"created": rfc3339(), "packages": [p.name for p in packages], "sha256": digests}
                _write_ready(path, dict(ready, requirements=list(requirements)))
        return Environment(key, path, path / "bin" / "python", cache_hit=hit, notes=tuple(notes))
