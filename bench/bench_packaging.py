"""Packaging and staging: what building and content-addressed staging cost beside the plain way.

- build: ``build_sdist`` (temporary copy, setuptools subprocess, tar normalisation) vs
  ``python -m build --sdist --no-isolation`` of the same project;
- staging a 100 MB wheel: ``StorageHook.stage_file`` (md5+crc32c, metadata check, precondition,
  progress, verification) vs a plain ``blob.upload_from_filename``, both to one fake-gcs-server
  this module starts and stops;
- a re-run: bytes on the wire (counted at the HTTP boundary) and wall time, vs uploading again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

from bench.common import Figure, Series, sample

TOPIC = "Packaging and staging"
WHEEL_BYTES = 100 * 1000 * 1000
SETUP_PY = (
    "from setuptools import find_packages, setup\n"
    "setup(name='bench-trainer', version='1.0', packages=find_packages(), include_package_data=True)\n"
)


def make_project(root: Path) -> Path:
    """A trainer shaped like the recommended layout: setup.py + trainer/{task,model,util}.py."""
    package = root / "trainer"
    package.mkdir(parents=True)
    (root / "setup.py").write_text(SETUP_PY)
    (package / "__init__.py").write_text("")
    for module in ("task", "model", "util"):
        (package / f"{module}.py").write_text(f'"""{module}."""\n' + "X = 1\n" * 200)
    return package


def build_figures(work: Path, repeats: int) -> list[Figure]:
    from airflow_aip.packaging import build_sdist

    package = make_project(work / "ours")
    baseline_src = work / "baseline"
    shutil.copytree(package.parent, baseline_src)  # `build` writes egg-info into its source tree
    out = work / "out"

    def baseline() -> None:
        subprocess.run(
            [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out / "b"), "."],
            cwd=baseline_src,
            check=True,
            capture_output=True,
        )

    shas = set()

    def ours() -> None:
        shas.add(build_sdist(package, out / "o").sha256)

    ours()  # warm caches for both
    baseline()
    ours_s, base_s = sample(ours, repeats), sample(baseline, repeats)
    if len(shas) != 1:
        raise RuntimeError(f"build_sdist was not reproducible across {repeats + 1} builds: {shas}")
    return [
        Figure(
            TOPIC,
            "build the trainer sdist",
            "s",
            Series("build_sdist (reproducible)", ours_s),
            Series("python -m build --sdist --no-isolation", base_s),
            goal="no slower than `python -m build`",
            goal_met=Series("", ours_s).median <= Series("", base_s).median,
            notes=[f"{repeats + 1} builds of the same source gave 1 sha256 (byte-identical archives)"],
        )
    ]


@contextmanager
def fake_gcs(work: Path) -> Iterator[Any]:
    """fake-gcs-server on a free port, with STORAGE_EMULATOR_HOST pointing at it; stopped by PID."""
    from airflow_aip.local.storage.gcs import FakeGcsServer

    server = FakeGcsServer(work / "gcs" / "data").start()
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = server.url
    try:
        yield server
    finally:
        server.stop()
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous


@contextmanager
def wire_bytes() -> Iterator[list[int]]:
    """Count request-body bytes sent to Cloud Storage (the HTTP boundary), whatever the caller claims."""
    from google.auth.transport.requests import AuthorizedSession

    original: Callable[..., Any] = AuthorizedSession.request
    sent = [0]

    def request(self: AuthorizedSession, method: str, url: str, data: Any = None, **kwargs: Any) -> Any:
        if isinstance(data, (bytes, bytearray)):
            sent[0] += len(data)
        return original(self, method, url, data=data, **kwargs)

    with mock.patch.object(AuthorizedSession, "request", request):
        yield sent


def staging_figures(work: Path, repeats: int) -> list[Figure]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from airflow_aip.hooks.storage import StorageHook

    wheel = work / "big_dep-1.0-py3-none-any.whl"
    with open(wheel, "wb") as fh:
        for _ in range(WHEEL_BYTES // 10_000_000):
            fh.write(os.urandom(10_000_000))

    with fake_gcs(work):
        client = storage.Client(project="bench", credentials=AnonymousCredentials())
        bucket = client.create_bucket(f"aip-bench-{uuid.uuid4().hex[:10]}")
        hook = StorageHook()

        def fresh(prefix: str) -> str:
            return f"{prefix}/{uuid.uuid4().hex}/{wheel.name}"

        def stage(name: str) -> None:
            hook.stage_file(wheel, f"gs://{bucket.name}/{name}")

        def upload(name: str) -> None:
            bucket.blob(name).upload_from_filename(str(wheel))

        ours_s, base_s = [], []
        for _ in range(repeats):  # interleaved, so drift in the emulator's disk hits both alike
            name = fresh("ours")
            ours_s += sample(partial(stage, name), 1)
            bucket.blob(name).delete()
            name = fresh("plain")
            base_s += sample(partial(upload, name), 1)
            bucket.blob(name).delete()

        staged_uri = f"gs://{bucket.name}/{fresh('rerun')}"
        hook.stage_file(wheel, staged_uri)
        rerun_bytes, rerun_s, again_bytes, again_s = [], [], [], []
        for _ in range(repeats):
            with wire_bytes() as sent:
                rerun_s += sample(lambda: hook.stage_file(wheel, staged_uri), 1)
            rerun_bytes.append(float(sent[0]))
            name = fresh("again")
            with wire_bytes() as sent:
                again_s += sample(partial(upload, name), 1)
            again_bytes.append(float(sent[0]))
            bucket.blob(name).delete()

    mb = WHEEL_BYTES / 1e6
    return [
        Figure(
            TOPIC,
            f"stage a {mb:.0f} MB wheel (first upload)",
            "s",
            Series("StorageHook.stage_file", ours_s),
            Series("blob.upload_from_filename", base_s),
            notes=[
                "fake-gcs-server on loopback, filesystem backend; the bench starts and stops it",
                "stage_file's extra cost is md5+crc32c of the file (the re-run figure is mostly that) and"
                " 4 resumable chunks for progress logging where the plain upload sends one",
            ],
        ),
        Figure(
            TOPIC,
            f"bytes uploaded when re-staging the unchanged {mb:.0f} MB wheel",
            "B",
            Series("stage_file re-run", rerun_bytes),
            Series("upload_from_filename again", again_bytes),
            goal="0 bytes",
            goal_met=all(b == 0 for b in rerun_bytes),
            notes=["request-body bytes counted at the HTTP boundary (AuthorizedSession.request)"],
        ),
        Figure(
            TOPIC,
            f"re-staging the unchanged {mb:.0f} MB wheel",
            "s",
            Series("stage_file re-run (hash + 1 metadata GET)", rerun_s),
            Series("upload_from_filename again", again_s),
        ),
    ]


def run(repeats: int) -> list[Figure]:
    work = Path(tempfile.mkdtemp(prefix="aip-bench-packaging-"))
    try:
        return build_figures(work, repeats) + staging_figures(work, repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    for figure in run(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
        base = f"{figure.baseline.label}: {figure.baseline.cell(figure.unit)}" if figure.baseline else "-"
        print(
            f"{figure.name}: {figure.ours.label}: {figure.ours.cell(figure.unit)} | {base}"
            f" | ratio {figure.ratio}"
        )
