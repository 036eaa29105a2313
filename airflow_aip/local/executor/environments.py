"""Fetch a job's packageUris and install them into a cached environment, as the container holds them.

On Vertex AI the trainer package is pip-installed into the pre-built container its
``executorImageUri`` names: that image's Python and framework, and nothing of ours. Each job here
gets the same (the *isolated* runtime, the default): a fresh virtual environment on the image's
Python minor version (:mod:`.interpreters`), the image's framework at its version
(:mod:`airflow_aip.jobs.vertex.containers`), then the job's packages on top, both installed by
uv from the package registries (``offline``: from uv's cache only). A trainer that imports a
package it never declared fails here as it would on Vertex, with ``ModuleNotFoundError``.

The *host* runtime (``aip-local serve --runtime host``) is the old, lenient one: a venv whose
``.pth`` adds the service's own site-packages, for machines with no package index at all.

Environments are keyed by the sha256 of what goes in (the runtime, the Python, the package files
in order), so a second job with the same packages starts at once. A file lock per key makes
concurrent jobs wait for one build; a ``ready.json`` written last marks a complete environment,
so a build interrupted by a crash is discarded and redone.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.containers import Runtime
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.executor.builders import PreparationError, build_host, build_isolated, runtime_python
from airflow_aip.local.executor.processes import LineSink
from airflow_aip.local.store import safe_child
from airflow_aip.packaging import sha256_file
from airflow_aip.uris import parse_gcs_uri

READY_FILE = "ready.json"
RUNTIMES = ("isolated", "host")
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


class EnvironmentCache:
    """Environments under ``root``, one directory per key; ``runtime`` is ``isolated`` or ``host``."""

    def __init__(
        self, root: Path, python: str = sys.executable, *, offline: bool = False, runtime: str = "isolated"
    ) -> None:
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
        self.root = Path(root)
        self.python = python
        self.offline = offline
        self.runtime = runtime
        self.root.mkdir(parents=True, exist_ok=True)

    def key_for(self, digests: Sequence[str], python: Path, requirements: Sequence[str] = ()) -> str:
        identity = {
            "python": str(python.resolve()),
            "runtime": self.runtime,
            "requirements": list(requirements),
        }
        payload = json.dumps({"runtime": identity, "packages": list(digests), "offline": self.offline})
        return hashlib.sha256(payload.encode()).hexdigest()[:32]

    def prepare(
        self,
        packages: Sequence[Path],
        log: LineSink,
        should_stop: Callable[[], bool],
        runtime: Runtime | None = None,
    ) -> Environment:
        """The environment for ``packages`` on ``runtime`` (None: the service's Python, no framework)."""
        notes: list[str] = []
        if self.runtime == "host":
            python, requirements = Path(self.python), tuple[str, ...]()
            if runtime is not None:
                notes.append(
                    f"executorImageUri {runtime.image} ({runtime.describe()}) is not reproduced: "
                    "aip-local serve --runtime host runs packages on the service's own Python and packages"
                )
        else:
            python, notes = runtime_python(runtime, Path(self.python))
            requirements = runtime.requirements if runtime is not None else ()
        digests = [sha256_file(p) for p in packages]
        key = self.key_for(digests, python, requirements)
        path = self.root / key
        with (self.root / f"{key}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                hit = (path / READY_FILE).exists()
                if not hit:
                    if path.exists():
                        shutil.rmtree(path)  # an earlier build that never finished
                    if self.runtime == "host":
                        build_host(path, python, packages, log, should_stop, offline=self.offline)
                    else:
                        build_isolated(
                            path, python, requirements, packages, log, should_stop, offline=self.offline
                        )
                    ready = {"created": rfc3339(), "packages": [p.name for p in packages], "sha256": digests}
                    (path / READY_FILE).write_text(
                        json.dumps(dict(ready, requirements=list(requirements)), indent=1)
                    )
                return Environment(key, path, path / "bin" / "python", cache_hit=hit, notes=tuple(notes))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
