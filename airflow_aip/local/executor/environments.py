"""Fetch a job's packageUris and install them into a cached per-job Python environment.

As on the real service, the trainer package (and the extra packages beside it) is pip
installed on top of the runtime's Python. Here the runtime is the service's own Python: each
environment is a venv whose ``.pth`` file adds the service's site-packages *behind* the venv's
own, so a trainer's dependencies that are already installed are simply found (no network
needed; ``offline`` adds ``--no-index`` so pip cannot even try), while the trainer itself and
anything it pins differently install into the venv without touching the service.

Environments are keyed by the sha256 of the package files (in order) and of the Python used,
so a second job with the same packages starts without installing anything. A file lock per
key makes concurrent jobs wait for one build; a ``ready.json`` written last marks a complete
environment, so a build interrupted by a crash is discarded and redone.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.executor.processes import LineSink, run_to_end
from airflow_aip.local.store import safe_child
from airflow_aip.uris import parse_gcs_uri

READY_FILE = "ready.json"
PARENT_PTH = "_aip_local_parent.pth"


class PreparationError(Exception):
    """The job's packages could not be fetched or installed; the message becomes errorMessage."""


@dataclass(frozen=True)
class Environment:
    """A ready environment: run ``python -m <module>`` with ``python``."""

    key: str
    path: Path
    python: Path
    cache_hit: bool


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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


def _site_dirs(python: str) -> list[str]:
    """The site-packages directories on ``python``'s path, in order."""
    if Path(python).resolve() == Path(sys.executable).resolve():
        path = sys.path
    else:
        out = subprocess.run(
            [python, "-c", "import json, sys; print(json.dumps(sys.path))"], capture_output=True, check=True
        )
        path = json.loads(out.stdout)
    return [
        p for p in path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and Path(p).is_dir()
    ]


class EnvironmentCache:
    """Environments under ``root``, one directory per package-set key."""

    def __init__(self, root: Path, python: str = sys.executable, *, offline: bool = False) -> None:
        self.root = Path(root)
        self.python = python
        self.offline = offline
        self.root.mkdir(parents=True, exist_ok=True)

    def key_for(self, digests: Sequence[str]) -> str:
        identity = {"python": str(Path(self.python).resolve()), "version": list(sys.version_info[:3])}
        payload = json.dumps({"runtime": identity, "packages": list(digests), "offline": self.offline})
        return hashlib.sha256(payload.encode()).hexdigest()[:32]

    def prepare(
        self, packages: Sequence[Path], log: LineSink, should_stop: Callable[[], bool]
    ) -> Environment:
        """The environment for ``packages``, from the cache or freshly built."""
        digests = [sha256_file(p) for p in packages]
        key = self.key_for(digests)
        path = self.root / key
        with (self.root / f"{key}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if (path / READY_FILE).exists():
                    return Environment(key, path, path / "bin" / "python", cache_hit=True)
                self._build(path, packages, digests, log, should_stop)
                return Environment(key, path, path / "bin" / "python", cache_hit=False)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _build(
        self,
        path: Path,
        packages: Sequence[Path],
        digests: Sequence[str],
        log: LineSink,
        should_stop: Callable[[], bool],
    ) -> None:
        if path.exists():
            shutil.rmtree(path)  # an earlier build that never finished
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
        env.update({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PYTHONUNBUFFERED": "1"})
        code, tail = run_to_end(
            [self.python, "-m", "venv", "--without-pip", str(path)],
            cwd=self.root,
            env=env,
            sink=log,
            should_stop=should_stop,
        )
        if code != 0:
            raise PreparationError(f"creating the environment failed (exit code {code}): {tail}")
        lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in _site_dirs(self.python))
        for site_packages in path.glob("lib/python*/site-packages"):
            (site_packages / PARENT_PTH).write_text(lines)
        python = path / "bin" / "python"
        pip = [str(python), "-m", "pip", "install", "--no-build-isolation", "--no-warn-script-location"]
        if self.offline:
            pip.append("--no-index")
        code, tail = run_to_end(
            [*pip, *map(str, packages)], cwd=path, env=env, sink=log, should_stop=should_stop
        )
        if code is None:
            raise PreparationError("cancelled while installing packages")
        if code != 0:
            raise PreparationError(f"pip install of the packageUris failed with exit code {code}:\n{tail}")
        ready = {"created": rfc3339(), "packages": [p.name for p in packages], "sha256": list(digests)}
        (path / READY_FILE).write_text(json.dumps(ready, indent=1))
