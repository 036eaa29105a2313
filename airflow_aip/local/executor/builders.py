"""The two ways a job's environment is built: isolated (as in the container) and host (lenient).

*Isolated* is a virtual environment of the image's Python with nothing of the service's in it:
uv installs the image's framework first, then the job's packages on top in a second step, so a
trainer that asks for a newer framework upgrades it, as ``pip install`` does in the container.
uv (a PyPI wheel carrying its binary) is used for its cache: a warm rebuild hard-links packages
from it instead of downloading or copying them. It never downloads a Python (the registries
carry none), and with ``offline`` it reads only its cache.

*Host* is the service's own Python with its site-packages added behind the venv's own by a
``.pth`` file, installed with pip; a machine with no package index can still run jobs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from airflow_aip.jobs.vertex.containers import Runtime
from airflow_aip.local.executor.interpreters import find_python
from airflow_aip.local.executor.processes import LineSink, run_to_end

PARENT_PTH = "_aip_local_parent.pth"
# Variables of the service that would steer a build elsewhere.
_NOT_INHERITED = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "UV_SYSTEM_PYTHON"}


class PreparationError(Exception):
    """The job's packages could not be fetched or installed; the message becomes errorMessage."""


def runtime_python(runtime: Runtime | None, fallback: Path) -> tuple[Path, list[str]]:
    """The interpreter for ``runtime`` and the lines the job's log needs where this machine differs."""
    if runtime is None:
        return fallback, []
    notes = [f"executorImageUri {runtime.image}: {runtime.describe()}, in an isolated environment"]
    if runtime.accelerated:
        notes.append(
            f"executorImageUri {runtime.image} is a {runtime.device.upper()} image; this machine has none, "
            f"so {runtime.framework}'s build from the package registries runs on the CPU"
        )
    python = find_python(runtime.python)
    if python is None:
        here = "{}.{}".format(*sys.version_info[:2])
        notes.append(
            f"executorImageUri {runtime.image} runs Python {runtime.python}, which this machine lacks and "
            f"the package registries cannot give; the job runs on the service's Python {here}"
        )
        return fallback, notes
    return python, notes


def _build_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env.update(
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        PYTHONUNBUFFERED="1",
        UV_PYTHON_DOWNLOADS="never",
        UV_NO_PROGRESS="1",
        UV_NO_CONFIG="1",
    )
    return env


def _run(argv: Sequence[str], cwd: Path, log: LineSink, should_stop: Callable[[], bool], what: str) -> None:
    code, tail = run_to_end(list(argv), cwd=cwd, env=_build_env(), sink=log, should_stop=should_stop)
    if code is None:
        raise PreparationError(f"cancelled while {what}")
    if code != 0:
        raise PreparationError(f"{what} failed with exit code {code}:\n{tail}")


def _uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def build_isolated(
    path: Path,
    python: Path,
    requirements: Sequence[str],
    packages: Sequence[Path],
    log: LineSink,
    should_stop: Callable[[], bool],
    *,
    offline: bool,
) -> None:
    """A fresh venv of ``python``; the image's ``requirements``, then ``packages``, installed by uv."""
    uv = _uv()
    cwd = path.parent
    _run(
        [uv, "venv", "--quiet", "--python", str(python), str(path)],
        cwd,
        log,
        should_stop,
        "creating the environment",
    )
    install = [uv, "pip", "install", "--python", str(path / "bin" / "python")]
    if offline:
        install.append("--offline")
    if requirements:
        _run([*install, *requirements], cwd, log, should_stop, "installing the image's packages")
    _run([*install, *map(str, packages)], cwd, log, should_stop, "installing the packageUris")


def _site_dirs(python: Path) -> list[str]:
    """The site-packages directories on ``python``'s path, in order."""
    if python.resolve() == Path(sys.executable).resolve():
        search_path = sys.path
    else:
        out = subprocess.run(
            [str(python), "-c", "import json, sys; print(json.dumps(sys.path))"],
            capture_output=True,
            check=True,
        )
        search_path = json.loads(out.stdout)
    return [
        p
        for p in search_path
        if p.rstrip("/").endswith(("site-packages", "dist-packages")) and Path(p).is_dir()
    ]


def build_host(
    path: Path,
    python: Path,
    packages: Sequence[Path],
    log: LineSink,
    should_stop: Callable[[], bool],
    *,
    offline: bool,
) -> None:
    """A venv of the service's Python that also sees the service's packages; pip installs ``packages``."""
    cwd = path.parent
    _run(
        [str(python), "-m", "venv", "--without-pip", str(path)],
        cwd,
        log,
        should_stop,
        "creating the environment",
    )
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in _site_dirs(python))
    for site_packages in path.glob("lib/python*/site-packages"):
        (site_packages / PARENT_PTH).write_text(lines)
    pip = [
        str(path / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--no-build-isolation",
        "--no-warn-script-location",
    ]
    if offline:
        pip.append("--no-index")
    _run([*pip, *map(str, packages)], cwd, log, should_stop, "pip install of the packageUris")
