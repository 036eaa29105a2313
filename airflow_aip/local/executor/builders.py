"""The two ways a job's environment is built: isolated (as in the container) and host (lenient).

*Isolated* is a virtual environment of the image's Python with nothing of the service's in it,
built in two layers as the container is: the *image* (its framework and the Google and data
libraries it ships, :mod:`airflow_aip.jobs.vertex.image_packages`), built once per image and
kept; then, per job, a hard-linked copy of it with the job's packages installed on top, so a
trainer that asks for a newer pandas upgrades it, and one content with the image's is told
"already satisfied", as ``pip install`` in the container does. A copy costs ~0.2 s where
installing the image's ~25 packages again cost ~6 s. uv (a PyPI wheel carrying its binary) is
used for its cache: a build hard-links packages from it instead of downloading them. It never
downloads a Python (the registries carry none), and with ``offline`` it reads only its cache.

The image's Python must be on this machine (:mod:`.interpreters`); where it is not, the job fails
saying so, unless ``aip-local serve --allow-python-mismatch`` lets it run on the service's.

The image's layer is byte-compiled once, when it is built, as ``pip install`` in the container
does: with nothing compiled, every replica of every job compiled the Google, data and framework
libraries again (a trial's imports took 4-8 s where they take ~1 s compiled, on 2 cores), and
under ``PYTHONDONTWRITEBYTECODE`` nothing was ever kept. The ``.pyc`` files are hard-linked into
each job's copy with their sources, whose modification times (in the ``.pyc`` header) they share.

*Host* is the service's own Python with its site-packages added behind the venv's own by a
``.pth`` file, installed with pip; a machine with no package index can still run jobs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from airflow_aip.jobs.vertex.containers import Runtime
from airflow_aip.local.executor.interpreters import find_python
from airflow_aip.local.executor.processes import LineSink, run_to_end

READY_FILE = "ready.json"  # written last: marks an environment, or an image's layer, complete

PARENT_PTH = "_aip_local_parent.pth"
# Variables of the service that would steer a build elsewhere.
_NOT_INHERITED = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "UV_SYSTEM_PYTHON"}


class PreparationError(Exception):
    """The job's packages could not be fetched or installed; the message becomes errorMessage."""


def runtime_python(
    runtime: Runtime | None, fallback: Path, *, allow_mismatch: bool
) -> tuple[Path, list[str]]:
    """The interpreter for ``runtime`` and the lines the job's log needs where this machine differs.

    A Python this machine lacks is a PreparationError naming it, unless ``allow_mismatch``: then
    the service's Python (``fallback``) runs the job and the log says so.
    """
    if runtime is None:
        return fallback, []
    notes = [f"{runtime.image}: {runtime.describe()}, in an isolated environment"]
    if runtime.unconfirmed:
        notes.append(
            f"{runtime.image}: unconfirmed entries of what it ships, installed as real images are observed "
            f"to hold them: {', '.join(runtime.unconfirmed)} ({runtime.source})"
        )
    if runtime.accelerated:
        notes.append(
            f"executorImageUri {runtime.image} is a {runtime.device.upper()} image; this machine has none, "
            f"so {runtime.framework}'s build from the package registries runs on the CPU"
        )
    python = find_python(runtime.python)
    if python is None:
        lacking = (
            f"{runtime.image} runs Python {runtime.python}, which this machine lacks (looked for "
            f"python{runtime.python} on PATH, in pyenv and in uv's Pythons)"
        )
        if not allow_mismatch:
            raise PreparationError(
                f"{lacking}; install it, or start aip-local serve with --allow-python-mismatch to run "
                "such jobs on the service's Python"
            )
        here = "{}.{}".format(*sys.version_info[:2])
        notes.append(f"{lacking}; the job runs on the service's Python {here} (--allow-python-mismatch)")
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


def build_image(
    path: Path,
    python: Path,
    requirements: Sequence[str],
    log: LineSink,
    should_stop: Callable[[], bool],
    *,
    offline: bool,
) -> None:
    """A fresh venv of ``python`` holding what the image ships (``requirements``), installed by uv."""
    uv = _uv()
    cwd = path.parent
    _run(
        [uv, "venv", "--quiet", "--python", str(python), str(path)],
        cwd,
        log,
        should_stop,
        "creating the environment",
    )
    if requirements:
        _run(
            [*_install(uv, path, offline), *requirements],
            cwd,
            log,
            should_stop,
            "installing the image's packages",
        )
    compile_bytecode(path, log, should_stop)


def compile_bytecode(path: Path, log: LineSink, should_stop: Callable[[], bool]) -> None:
    """Byte-compile the environment at ``path`` with its own Python (its ``.pyc`` tag).

    A module that does not compile (a package's test file in an old syntax) is skipped, as
    ``pip install`` skips it: it is not an error, the module compiles on import if ever imported.
    """
    python = path / "bin" / "python"
    for site_packages in sorted(path.glob("lib/python*/site-packages")):
        code, _ = run_to_end(
            [str(python), "-m", "compileall", "-q", "-q", "-j", "0", str(site_packages)],
            cwd=path,
            env=_build_env(),
            sink=log,
            should_stop=should_stop,
        )
        if code is None:
            raise PreparationError("cancelled while compiling the image's packages")


def build_isolated(
    path: Path,
    image: Path,
    packages: Sequence[Path],
    log: LineSink,
    should_stop: Callable[[], bool],
    *,
    offline: bool,
) -> None:
    """A hard-linked copy of the ``image`` environment, with ``packages`` installed on top by uv.

    The copy shares the image's files (no space, ~0.2 s); an installer replaces a file by a new
    one rather than writing into it, so the image's stay as they were.
    """
    # Not the image's ready.json: an environment is complete only once its packages are in and
    # its own is written (environments.py); a copy holding the image's would look complete now.
    not_ready = shutil.ignore_patterns(READY_FILE)
    shutil.copytree(
        image,
        path,
        symlinks=True,
        copy_function=_link_or_copy,
        ignore=lambda d, n: not_ready(d, n) if Path(d) == image else set(),
    )
    _run(
        [*_install(_uv(), path, offline), *map(str, packages)],
        path.parent,
        log,
        should_stop,
        "installing the packageUris",
    )


def _link_or_copy(source: str, target: str) -> None:
    """A hard link; a copy where the image's cache is on another file system."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _install(uv: str, path: Path, offline: bool) -> list[str]:
    return [
        uv,
        "pip",
        "install",
        "--python",
        str(path / "bin" / "python"),
        *(["--offline"] if offline else []),
    ]


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
