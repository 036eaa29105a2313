"""Find a Python of a given minor version on this machine, as a container image would bring it.

Vertex runs a trainer on the Python of its ``executorImageUri`` (3.10 for most current images).
The package registries carry no Python builds, so the local service can only use what this
machine has: ``python3.X`` on ``PATH``, a pyenv version, or one uv installed earlier. The first
that answers with the right version wins; none found means the caller falls back to the
service's own Python and says so in the job's log.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path


def _version_of(python: Path) -> str | None:
    try:
        out = subprocess.run(
            [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _candidates(minor: str) -> list[Path]:
    names = [shutil.which(f"python{minor}")]
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    uv_root = Path(os.environ.get("UV_PYTHON_INSTALL_DIR", Path.home() / ".local/share/uv/python"))
    found = [Path(n) for n in names if n]
    found += sorted(pyenv_root.glob(f"versions/{minor}.*/bin/python{minor}"), reverse=True)
    found += sorted(uv_root.glob(f"cpython-{minor}.*/bin/python{minor}"), reverse=True)
    found += [Path(f"/usr/bin/python{minor}"), Path(f"/usr/local/bin/python{minor}")]
    return found


@functools.cache
def find_python(minor: str) -> Path | None:
    """An interpreter of Python ``minor`` (``"3.10"``), or None when this machine has none."""
    if "{}.{}".format(*sys.version_info[:2]) == minor:
        return Path(sys.executable)
    for candidate in _candidates(minor):
        if candidate.exists() and _version_of(candidate) == minor:
            return candidate
    return None
