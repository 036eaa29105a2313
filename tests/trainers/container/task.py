"""The container tests' trainer: the standard library and cloudml-hypertune only (the image has no more).

``python3 task.py MODE [--out gs://...] [--x N]``, each MODE one behaviour a test checks:

- ``report``: reports ``accuracy`` = x / 4 through cloudml-hypertune (to the container's own
  ``/tmp/hypertune/output.metrics``) and writes what the service set in ``report.json``;
- ``rendezvous``: PyTorch's rendezvous reduced to TCP: rank 0 listens on MASTER_ADDR:MASTER_PORT
  until every other rank has said hello, the others (each holding that port too) connect and say
  their rank and hostname;
- ``role``: every replica writes which image it ran in; the primary waits for all of them;
- ``sleep``: says it is running, then sleeps until stopped;
- ``fail``: dies of a Python exception, exit status 1.

Output goes to ``--out`` (default ``AIP_MODEL_DIR``) through ``/gcs/`` where it is mounted, else
through the Cloud Storage emulator's JSON API at STORAGE_EMULATOR_HOST.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

_SEEN: tuple[str, ...] = ("CLUSTER_SPEC", "TF_CONFIG", "CLOUD_ML_JOB_ID", "AIP_MODEL_DIR", "MASTER_ADDR")
_SEEN += (
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "GCE_METADATA_HOST",
    "STORAGE_EMULATOR_HOST",
    "AIP_TEST_IMAGE_ROLE",
    "PYTHONPATH",
)


def _split(uri: str) -> tuple[str, str]:
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    return bucket, name


def write(uri: str, document: dict[str, Any]) -> None:
    bucket, name = _split(uri)
    if os.path.ismount("/gcs"):
        path = f"/gcs/{bucket}/{name}"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as out:
            json.dump(dict(document, via="/gcs"), out)
        return
    host = os.environ["STORAGE_EMULATOR_HOST"].rstrip("/")
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    body = json.dumps(dict(document, via="emulator")).encode()
    request = urllib.request.Request(f"{host}/upload/storage/v1/b/{bucket}/o?{query}", body, method="POST")
    request.add_header("Content-Type", "application/json")
    urllib.request.urlopen(request, timeout=30).close()


def exists(uri: str) -> bool:
    bucket, name = _split(uri)
    host = os.environ["STORAGE_EMULATOR_HOST"].rstrip("/")
    try:
        urllib.request.urlopen(f"{host}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}").close()
    except urllib.error.HTTPError:
        return False
    return True


def seen() -> dict[str, Any]:
    return {name: os.environ.get(name) for name in _SEEN}


def task_name() -> str:
    task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
    return f"{task['type']}-{task['index']}"


def report(out: str, x: float) -> None:
    hypertune: Any = importlib.import_module("hypertune")
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=x / 4, global_step=1
    )
    write(f"{out}report.json", dict(seen(), x=x))


def rendezvous(out: str) -> None:
    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    me = socket.gethostname()
    if rank == 0:
        with socket.create_server((address, port)) as server:
            heard: list[str] = []
            while len(heard) < world - 1:
                connection, _ = server.accept()
                with connection:
                    heard.append(connection.recv(64).decode())
                    connection.sendall(b"ok")
        write(f"{out}rendezvous.json", dict(seen(), heard=sorted(heard), hostname=me))
        return
    # Every replica holds the same fixed port too, as each one's sshd holds 2222 for MPI or DeepSpeed.
    with socket.create_server(("", port)):
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection((address, port), timeout=5) as connection:
                    connection.sendall(f"{rank} {me}".encode())
                    assert connection.recv(64) == b"ok"
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def role(out: str) -> None:
    write(f"{out}role-{task_name()}.json", seen())
    cluster = json.loads(os.environ["CLUSTER_SPEC"])["cluster"]
    if task_name() not in ("master-0", "workerpool0-0"):  # ml v1's primary, Vertex AI's
        time.sleep(3600)  # the primary's exit ends the job
    others = [
        f"{out}role-{kind}-{index}.json" for kind, hosts in cluster.items() for index in range(len(hosts))
    ]
    deadline = time.monotonic() + 120
    while not all(exists(uri) for uri in others):
        if time.monotonic() > deadline:
            sys.exit("not every replica wrote its role")
        time.sleep(0.2)


def main() -> None:
    # PID 1 in a container has no default SIGTERM action: without this a stop waits for SIGKILL.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("report", "rendezvous", "role", "sleep", "fail"))
    parser.add_argument("--out", default=os.environ.get("AIP_MODEL_DIR", ""))
    parser.add_argument("--job-dir", default="")
    parser.add_argument("--x", type=float, default=1.0)
    args, _ = parser.parse_known_args()
    out = (args.job_dir.rstrip("/") + "/") if args.job_dir and not args.out else args.out
    if args.mode == "report":
        report(out, args.x)
    elif args.mode == "rendezvous":
        rendezvous(out)
    elif args.mode == "role":
        role(out)
    elif args.mode == "fail":
        raise ValueError("the trainer failed on purpose")
    else:
        write(f"{out}sleeping-{task_name()}.json", seen())
        time.sleep(3600)


if __name__ == "__main__":
    main()
