"""Debian's docker-registry on loopback: the stand-in for Artifact Registry in `make ui` and the tests.

A real OCI registry server (the distribution project's), so the image operator pushes and the
local training service pulls exactly as they would against Artifact Registry, over plain HTTP on
127.0.0.1 (docker allows that for localhost; podman is told ``--tls-verify=false``).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from airflow_aip.local.ports import free_port
from scripts.stack import port_is_free, start, stop_group

# The image the examples' Dockerfile starts FROM here: built from Debian's packages by
# scripts/base_image.sh (`make prepare`), so no registry on the internet is needed.
LOCAL_BASE_IMAGE = "localhost/aip-base:bookworm-py3-hypertune"


@contextmanager
def image_registry(root: Path, port: int | None = None) -> Iterator[str | None]:
    """Serve ``root/data`` on 127.0.0.1 and yield ``localhost:<port>``; None when it is not installed."""
    binary = shutil.which("docker-registry")
    if binary is None:
        yield None
        return
    port = port if port is not None and port_is_free(port) else free_port()
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.yml"
    storage = f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
    config.write_text(f"version: 0.1\nlog:\n  level: warn\n{storage}http:\n  addr: 127.0.0.1:{port}\n")
    with (root / "registry.log").open("ab") as log:
        proc = start([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(f"http://127.0.0.1:{port}/v2/", proc)
        yield f"localhost:{port}"
    finally:
        stop_group(proc, timeout=30)


def _wait_for(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"docker-registry did not answer at {url}") from None
            time.sleep(0.1)
