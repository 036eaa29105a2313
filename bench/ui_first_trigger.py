"""Issue 47's proof: a trigger right after a fresh `make ui` start is accepted, every time.

``python -m bench.ui_first_trigger --starts 20``: N fresh starts of the ``make ui`` stack
(``scripts/ui.py``, each in a new empty home, on free ports). As soon as Airflow's API answers
(``/api/v2/monitor/health``) and the login exists, it logs in as the UI user (the simple auth
manager's JWT, ``POST /auth/token``) and POSTs a dagRun of aip_training_pipeline at once, as a
user's trigger from the form or the REST API does; a 404 (the Dag not parsed yet) is sent again
every 0.2 s, any other answer is the result. Then ``--more`` triggers follow, one a second,
while the example chain's first tasks (aip_prepare_data's daily run, unpaused at creation, and
the aip_retraining run its Asset event starts) write to the metadata DB. Each start is stopped
by SIGTERM to the UI script's PID (it stops everything it started), and every process seen
under it must have ended; whatever has not is SIGKILLed by PID and reported.

A failure is any 5xx to a trigger (issue 47: 500 "Database error", SQLite locked for 5 s by the
tasks ``make ui`` starts at once). ``--repo``: run another checkout's ``scripts/ui.py`` (a copy
of the code before a change, say), on this interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import psutil

from airflow_aip.local.ports import free_port

REPO = Path(__file__).resolve().parent.parent
DAG_ID = "aip_training_pipeline"
PASSWORDS = "simple_auth_manager_passwords.json.generated"
START_BOUND = 300.0  # seconds: a bound to fail on rather than hang, never a measure


@dataclass
class Start:
    """One fresh start: when things answered (seconds since the launch), what the triggers got."""

    number: int
    api_answered: float | None = None  # /api/v2/monitor/health answered 200
    greeted: float | None = None  # the UI script printed its greeting (make ui's "ready")
    first_accepted: float | None = None  # the first trigger's 200
    first_status: int | None = None  # the first trigger's answer, 404s (not parsed yet) aside
    statuses: list[int] = field(default_factory=list)  # every trigger's answer, 404s aside
    errors: list[str] = field(default_factory=list)  # the 5xx bodies
    leftovers: list[str] = field(default_factory=list)  # processes still running after the stop
    stop_seconds: float | None = None
    metadata_db: str = ""  # what the stack ran on: its home has a PostgreSQL cluster, or not

    @property
    def failed(self) -> bool:
        return bool(self.errors) or self.first_status != 200 or bool(self.leftovers)


def _env(home: Path, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "AIP_UI_HOME": str(home),
        "AIP_UI_PORT": str(port),
        "AIP_UI_REGISTRY_PORT": str(free_port()),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    }


class UiStart:
    """One fresh start of the UI script, watched by PID: every process seen under it is recorded."""

    def __init__(self, number: int, repo: Path) -> None:
        self.result = Start(number)
        self.root = Path(tempfile.mkdtemp(prefix="aip-ui-bench-"))
        self.root.chmod(0o755)  # as root, the home's PostgreSQL runs as nobody: it must enter
        self.home, port = self.root / "home", free_port()
        self.out = self.root / "ui.out"
        self.started = time.monotonic()
        with self.out.open("wb") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, str(repo / "scripts" / "ui.py")],
                cwd=repo,
                env=_env(self.home, port),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.seen: dict[int, psutil.Process] = {self.proc.pid: psutil.Process(self.proc.pid)}
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def since(self) -> float:
        return round(time.monotonic() - self.started, 2)

    def look(self) -> None:
        """Record what runs under the UI script now; note when its greeting is printed."""
        with suppress(psutil.Error):
            self.seen.update((p.pid, p) for p in self.seen[self.proc.pid].children(recursive=True))
        if self.result.greeted is None and b"Airflow UI:" in self.out.read_bytes():
            self.result.greeted = self.since()

    def bounded(self, what: str) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the UI script exited ({self.proc.returncode}) before {what}")
        if time.monotonic() - self.started > START_BOUND:
            raise RuntimeError(f"no {what} within {START_BOUND:.0f} s")

    def log_in(self) -> None:
        """As soon as the API answers and the login exists: the UI user's JWT on every request."""
        while True:
            self.look()
            self.bounded("an answering API")
            try:
                healthy = self.http.get("/api/v2/monitor/health").status_code == 200
                passwords = json.loads((self.home / PASSWORDS).read_text())
                if healthy and "admin" in passwords:
                    if self.result.api_answered is None:
                        self.result.api_answered = self.since()
                    login = {"username": "admin", "password": passwords["admin"]}
                    answer = self.http.post("/auth/token", json=login)
                    if answer.status_code in (200, 201):
                        self.http.headers["authorization"] = f"Bearer {answer.json()['access_token']}"
                        return
            except (httpx.HTTPError, OSError, ValueError, KeyError):
                pass
            time.sleep(0.1)

    def trigger(self) -> httpx.Response:
        body: dict[str, object] = {"logical_date": None, "conf": {}}
        answer = self.http.post(f"/api/v2/dags/{DAG_ID}/dagRuns", json=body)
        if answer.status_code != 404:
            self.result.statuses.append(answer.status_code)
            if answer.status_code >= 500:
                self.result.errors.append(f"{answer.status_code} {answer.text[:300]}")
        return answer

    def triggers(self, more: int, spacing: float) -> None:
        """The first trigger (sent again only while the Dag is not parsed), then ``more``."""
        while (answer := self.trigger()).status_code == 404:
            self.look()
            self.bounded(f"{DAG_ID} parsed")
            time.sleep(0.2)
        self.result.first_status = answer.status_code
        if answer.status_code == 200:
            self.result.first_accepted = self.since()
        for _ in range(more):
            time.sleep(spacing)
            self.look()
            self.trigger()
        while self.result.greeted is None:
            self.bounded("greeting")
            time.sleep(0.2)
            self.look()

    def stop(self, keep: Path | None) -> None:
        """SIGTERM to the UI script (it stops all it started); then nothing seen may be running."""
        self.http.close()
        self.look()
        stopping = time.monotonic()
        with suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            self.result.errors.append("the UI script did not exit within 180 s of SIGTERM")
        self.result.stop_seconds = round(time.monotonic() - stopping, 2)
        cluster = (self.home / "postgres" / "PG_VERSION").exists()  # scripts/postgres.py's
        self.result.metadata_db = "PostgreSQL" if cluster else "SQLite"
        for p in self.seen.values():
            if _alive(p):
                self.result.leftovers.append(_describe(p))
                with suppress(psutil.Error):
                    p.kill()
        if keep is not None and self.result.failed:
            keep.mkdir(parents=True, exist_ok=True)
            for name, path in (("ui.out", self.out), ("ui.log", self.home / "ui.log")):
                with suppress(OSError):
                    (keep / f"start-{self.result.number}-{name}").write_bytes(path.read_bytes())
        subprocess.run(["rm", "-rf", str(self.root)], check=False)


def one_start(number: int, repo: Path, more: int, spacing: float, keep: Path | None) -> Start:
    run = UiStart(number, repo)
    try:
        run.log_in()
        run.triggers(more, spacing)
    except (RuntimeError, httpx.HTTPError, OSError) as error:
        run.result.errors.append(f"{type(error).__name__}: {error}")
    finally:
        run.stop(keep)
    return run.result


def _alive(p: psutil.Process) -> bool:
    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _describe(p: psutil.Process) -> str:
    try:
        return f"{p.pid} {' '.join(p.cmdline())[:200]}"
    except psutil.Error:
        return f"{p.pid} (gone)"


def summary(starts: list[Start]) -> dict[str, object]:
    def spread(values: list[float | None]) -> str:
        got = [v for v in values if v is not None]
        if not got:
            return "-"
        return f"{min(got):.1f} / {statistics.median(got):.1f} / {max(got):.1f} s"

    return {
        "starts": len(starts),
        "metadata DB": ", ".join(sorted({s.metadata_db for s in starts})),
        "failed starts": sum(s.failed for s in starts),
        "first trigger refused (5xx)": sum((s.first_status or 0) >= 500 for s in starts),
        "triggers sent (404s aside)": sum(len(s.statuses) for s in starts),
        "triggers answered 5xx": sum(code >= 500 for s in starts for code in s.statuses),
        "API answered (min / median / max)": spread([s.api_answered for s in starts]),
        "first trigger accepted": spread([s.first_accepted for s in starts]),
        "greeting printed": spread([s.greeted for s in starts]),
        "stop": spread([s.stop_seconds for s in starts]),
        "leftover processes": sum(len(s.leftovers) for s in starts),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--more", type=int, default=5, help="triggers after the first, --spacing s apart")
    parser.add_argument("--spacing", type=float, default=1.0)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose scripts/ui.py runs")
    parser.add_argument("--json", type=Path, help="write every start's record here")
    parser.add_argument("--keep", type=Path, help="keep a failed start's output and ui.log here")
    args = parser.parse_args(argv)
    starts = []
    for number in range(1, args.starts + 1):
        start = one_start(number, args.repo.resolve(), args.more, args.spacing, args.keep)
        starts.append(start)
        print(json.dumps({**asdict(start), "failed": start.failed}), flush=True)
        if args.json:
            args.json.write_text(json.dumps([asdict(s) for s in starts], indent=1))
    figures = summary(starts)
    for name, value in figures.items():
        print(f"{name}: {value}")
    return 1 if figures["failed starts"] else 0


if __name__ == "__main__":
    sys.exit(main())
