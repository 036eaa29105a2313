"""This machine's OCI engine (podman or docker), as the image operator and the local service both find it.

The two drive an engine's command line rather than a client library: the engine then brings its
own credentials (``docker login``, ``gcloud auth configure-docker``, podman's auth file) and its
own store, exactly as a user's terminal does.

Pure: the standard library only (and :func:`airflow_aip.uris.is_loopback`, the one loopback rule).
"""

from __future__ import annotations

import functools
import re
import resource
import shutil
import subprocess

from airflow_aip.uris import is_loopback

ENGINES = ("podman", "docker")
ENGINE_CHOICES = ("auto", *ENGINES)


def ulimits() -> list[str]:
    """``--ulimit`` flags no higher than this process's: a sandbox that caps rlimits refuses more
    ("error setting rlimit"). Open files as the caller's own; processes 1024 (a root build or trainer
    is not held to it, and the engine's default was refused here)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = ["--ulimit", f"nofile={soft}:{hard}"] if resource.RLIM_INFINITY not in (soft, hard) else []
    return [*files, "--ulimit", "nproc=1024:1024"]


def loopback_registry(image: str) -> bool:
    """Whether ``image`` names a registry on this machine's loopback (``localhost:5000/...``).

    docker talks plain HTTP to those by default; podman needs ``--tls-verify=false``. So a local
    registry (Debian's ``docker-registry``, the stand-in for Artifact Registry) works with both.
    The host is loopback by :func:`~airflow_aip.uris.is_loopback`; a registry also needs a port,
    because ``localhost/name`` is podman's name for an image in its own store, never pulled.
    """
    first, slash, _ = image.partition("/")
    return bool(slash) and re.fullmatch(r".+:[0-9]+", first) is not None and is_loopback(first)


@functools.cache
def engine_works(binary: str) -> bool:
    """Whether ``<binary> info`` answers: installed is not enough (no daemon, no permission)."""
    try:
        done = subprocess.run([binary, "info"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def find_engine_binary(choice: str) -> str | None:
    """The path of the engine ``choice`` names (``auto``: podman, then docker) if it runs here."""
    for candidate in ENGINES if choice == "auto" else (choice,):
        binary = shutil.which(candidate)
        if binary is not None and engine_works(binary):
            return binary
    return None
