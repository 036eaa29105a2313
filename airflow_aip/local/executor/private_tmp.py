"""A private ``/tmp/hypertune`` (and temporary directory) per replica, as each Vertex replica's container has.

cloudml-hypertune writes its reports to ``$CLOUD_ML_HP_METRIC_FILE``, else to
``/tmp/hypertune/output.metrics`` (hypertune.py ``_DEFAULT_METRIC_PATH``), and trainers or
libraries that skip the library write that literal path themselves. On Vertex every replica is a
container with its own ``/tmp``, so neither collides with another replica's and both are read.

Locally a replica runs in a mount namespace of its own (``unshare --mount`` as root; a user
namespace mapping the caller to root otherwise, where the kernel allows one), where a directory
of the replica's work dir is bind-mounted over ``/tmp/hypertune``. Only that directory is
replaced, not the whole ``/tmp``: the job's environment and work dir may themselves live under
``/tmp``. ``TMPDIR`` points at a private directory too, so ``tempfile`` users are apart as well.

Where no namespace can be made (a container without ``CAP_SYS_ADMIN``, user namespaces
disabled), ``CLOUD_ML_HP_METRIC_FILE`` points into the private directory instead: cloudml-hypertune's
reports are read, a direct write to ``/tmp/hypertune/output.metrics`` is not, and
:func:`private_tmp_unavailable` says so in the job's log.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

METRIC_FILE_NAME = "output.metrics"
# Make the mount point (world-writable, as /tmp is), bind the replica's own directory over it, run.
_SCRIPT = r"""
private=$1; shift
mkdir -p /tmp/hypertune 2>/dev/null && chmod 1777 /tmp/hypertune 2>/dev/null
if ! mount --bind "$private" /tmp/hypertune; then
  echo "aip-local: a private /tmp/hypertune could not be mounted for this replica" >&2
  exit 1
fi
exec "$@"
"""


def _unshare() -> list[str] | None:
    """The ``unshare`` prefix that gives a mount namespace here, or None."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return None
    prefixes = [["unshare", "--mount", "--propagation", "private"]] if os.geteuid() == 0 else []
    prefixes.append(["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"])
    for prefix in prefixes:
        probe = [*prefix, "sh", "-c", "mount -t tmpfs none /mnt 2>/dev/null || mount --bind / /mnt"]
        try:
            done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return prefix
    return None


@functools.cache
def _prefix() -> tuple[str, ...] | None:
    found = _unshare()
    return tuple(found) if found is not None else None


def private_tmp_unavailable() -> str | None:
    """Why a replica's direct writes to ``/tmp/hypertune`` cannot be kept apart and read here, or None."""
    if _prefix() is not None:
        return None
    return (
        "no mount namespace can be made on this machine (root, or user namespaces, are needed): "
        "trials' cloudml-hypertune reports are read through CLOUD_ML_HP_METRIC_FILE, but a trainer that "
        "writes /tmp/hypertune/output.metrics itself is not read"
    )


def metric_file(private_dir: Path) -> Path:
    """Where a replica's reports land on this machine, whichever way it wrote them."""
    return private_dir / "hypertune" / METRIC_FILE_NAME


def prepare(private_dir: Path) -> dict[str, str]:
    """A fresh private directory for one replica; the variables that point the replica at it."""
    if private_dir.exists():
        shutil.rmtree(private_dir)
    (private_dir / "hypertune").mkdir(parents=True)
    (private_dir / "tmp").mkdir()
    env = {"TMPDIR": str(private_dir / "tmp")}
    if _prefix() is None:  # no namespace: only the library's reports can be pointed elsewhere
        env["CLOUD_ML_HP_METRIC_FILE"] = str(metric_file(private_dir))
    return env


def with_private_tmp(argv: Sequence[str], private_dir: Path) -> list[str]:
    """``argv`` run with ``private_dir/hypertune`` as its ``/tmp/hypertune`` (``argv`` itself where not)."""
    prefix = _prefix()
    if prefix is None:
        return list(argv)
    return [*prefix, "sh", "-c", _SCRIPT, "aip-private-tmp", str(private_dir / "hypertune"), *argv]
