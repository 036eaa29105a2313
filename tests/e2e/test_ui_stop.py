"""`make ui` stops whole: SIGTERM to its process group ends everything it started, every time.

How a user's tooling (or CI) stops it: SIGTERM to the process group of ``make ui``. GNU make
forwards that SIGTERM to the UI script, which so gets it twice at once; before, the second one
cut the cleanup short and left the whole ``airflow standalone`` group (scheduler,
dag-processor, triggerer, api-server and their workers) running, 4 stops in 9.

The test runs the Makefile's ``ui`` recipe through make itself (``make -o install -o gcs-fuse
ui``: the prerequisites are not remade, a test must not reinstall the venv or apt-get), as a
process group of its own with no stdin, in a home and on a port of its own, and stops it 10
times. While it runs, every process under make is recorded by PID (psutil: the local service,
fake-gcs-server, ``airflow db migrate``, ``airflow standalone`` and everything under it, the
tasks and training jobs of the example chain when they run); when make has exited, none of them
may be running (a zombie counts as ended: it holds nothing and its parent reaps it) and the
port must be free to listen on, as the next ``make ui`` will.

What is measured: each stop comes at a stage of the start, so that the 10 cover the whole start
without 10 full starts (one is 15-30 s here). 4 come when the greeting is printed (``ready``:
the api-server answers, the login exists, the whole standalone group runs), 4 when ``airflow
standalone`` has started its four components but the api-server does not answer yet (the
same double SIGTERM, the same group to end), 1 during the metadata DB migration and 1 right
after the local service started. The first stop, the
stack's first start in a fresh home, also checks that the example chain's Dags were created
unpaused, so a run of aip_prepare_data starts aip_retraining.

A second, quick test takes the stop's paths these 10 do not: SIGKILL after the timeout, and
SIGTERM to a process outside the group whose parent is gone.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import httpx
import psutil
import pytest

from airflow_aip.local.storage.gcs import free_port
from scripts.stack import REPO

pytestmark = pytest.mark.e2e

# Where in the start each stop comes, in order (see above): 4 of 10 with the UI up.
STAGES = [
    *("ready", "service", "standalone", "ready", "migrate"),
    *("standalone", "ready", "standalone", "ready", "standalone"),
]
CHAIN = ("aip_prepare_data", "aip_retraining")  # the Asset chain the README promises in make ui
START_TIMEOUT = 300.0  # a bound to fail on rather than hang, never an assertion


@pytest.fixture(scope="module")
def ui_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``make ui``'s environment: its own home and ports, nothing inherited from an outer make."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return {
        **env,
        "AIP_UI_HOME": str(tmp_path_factory.mktemp("make-ui")),
        "AIP_UI_PORT": str(free_port()),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    }


class MakeUi:
    """One ``make ui`` in a process group of its own, and every process seen under it, by PID."""

    def __init__(self, env: dict[str, str], out: Path) -> None:
        self.out = out
        with out.open("wb") as sink:
            self.proc = subprocess.Popen(
                ["make", "--no-print-directory", "-o", "install", "-o", "gcs-fuse", "ui"],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.make = psutil.Process(self.proc.pid)
        self.seen: dict[int, psutil.Process] = {self.proc.pid: self.make}

    def look(self) -> None:
        """Record what runs under make now (a process whose parent died was recorded before)."""
        with suppress(psutil.NoSuchProcess):
            self.seen.update((p.pid, p) for p in self.make.children(recursive=True))

    def wait_for(self, stage: str, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            self.look()
            if condition():
                self.look()
                return
            if self.proc.poll() is not None:
                pytest.fail(f"make ui exited ({self.proc.returncode}) before {stage}:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"make ui not at {stage} within {START_TIMEOUT:.0f}s:\n{self.output()}")
            time.sleep(0.2)

    def running(self, *words: str) -> list[psutil.Process]:
        """The recorded processes alive with all of ``words`` in their command line."""
        found = []
        for p in self.alive():
            try:
                cmdline = " ".join(p.cmdline())
            except psutil.Error:
                continue
            if all(word in cmdline for word in words):
                found.append(p)
        return found

    def alive(self) -> list[psutil.Process]:
        return [p for p in self.seen.values() if _alive(p)]

    def stop(self) -> None:
        """SIGTERM to make's process group, as ``kill -TERM -<pgid>`` does; wait for make to exit."""
        os.killpg(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + START_TIMEOUT
        while self.proc.poll() is None:  # keep looking: what forks while it stops is recorded too
            self.look()
            if time.monotonic() > deadline:
                pytest.fail(f"make ui still running {START_TIMEOUT:.0f}s after SIGTERM:\n{self.output()}")
            time.sleep(0.1)

    def output(self) -> str:
        return self.out.read_text(errors="replace")[-4000:]


def _alive(p: psutil.Process) -> bool:
    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _port_free(port: int) -> bool:
    """Whether a server can listen on the port (SO_REUSEADDR, as Airflow's api-server binds)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
            probe.listen()
        except OSError:
            return False
    return True


def _at(ui: MakeUi, stage: str) -> Callable[[], bool]:
    """Whether the start has reached ``stage`` (read from make's output and the processes seen)."""
    if stage == "ready":
        return lambda: "Airflow UI:" in ui.output()
    if stage == "service":
        return lambda: bool(ui.running("aip-local", "serve"))
    if stage == "migrate":
        return lambda: bool(ui.running("airflow", "db", "migrate"))
    if stage == "standalone":  # its scheduler, dag-processor, api-server and triggerer exist
        return lambda: any(_children(p) >= 4 for p in ui.running("airflow", "standalone"))
    raise ValueError(stage)


def _children(p: psutil.Process) -> int:
    try:
        return len(p.children())
    except psutil.Error:
        return 0


def _is_paused(env: dict[str, str], dag_ids: tuple[str, ...]) -> dict[str, bool]:
    """Each Dag's ``is_paused``, through the REST API as admin, once the dag-processor has parsed it."""
    base = f"http://127.0.0.1:{env['AIP_UI_PORT']}"
    passwords = Path(env["AIP_UI_HOME"]) / "simple_auth_manager_passwords.json.generated"
    login = {"username": "admin", "password": json.loads(passwords.read_text())["admin"]}
    with httpx.Client(base_url=base, timeout=30) as http:
        token = http.post("/auth/token", json=login).raise_for_status().json()["access_token"]
        http.headers["authorization"] = f"Bearer {token}"
        paused = {}
        deadline = time.monotonic() + START_TIMEOUT
        for dag_id in dag_ids:
            while (answer := http.get(f"/api/v2/dags/{dag_id}")).status_code == 404:
                if time.monotonic() > deadline:
                    pytest.fail(f"{dag_id} not parsed within {START_TIMEOUT:.0f}s")
                time.sleep(1)
            paused[dag_id] = bool(answer.raise_for_status().json()["is_paused"])
    return paused


@pytest.fixture
def leftovers() -> Iterator[list[psutil.Process]]:
    """What a failed run leaves: SIGKILLed by PID afterwards, so a failure does not linger."""
    left: list[psutil.Process] = []
    yield left
    for p in left:
        with suppress(psutil.Error):
            p.kill()


@pytest.mark.timeout(1500)  # 10 starts of the whole stack: 270 s alone, 600 s beside the suite
def test_sigterm_to_make_ui_ends_everything_it_started_every_time(
    ui_env: dict[str, str], tmp_path: Path, leftovers: list[psutil.Process]
) -> None:
    port, link = int(ui_env["AIP_UI_PORT"]), ""
    for attempt, stage in enumerate(STAGES, 1):
        ui = MakeUi(ui_env, tmp_path / f"make-ui-{attempt}.out")
        try:
            ui.wait_for(stage, _at(ui, stage))
            if attempt == 1:  # the fresh home: the example Dags are created now, unpaused
                assert _is_paused(ui_env, CHAIN) == dict.fromkeys(CHAIN, False)
            if stage == "ready":  # a job's stored link, made at the first start, opens at each
                link = link or _create_job(ui)
                assert _opens(link), (attempt, link, ui.output())
            running = len(ui.alive())
        finally:
            ui.stop()
        left = ui.alive()
        leftovers += left
        assert running > 2, (attempt, stage)  # make, the UI script and what it started were seen
        assert (attempt, stage, [_describe(p) for p in left]) == (attempt, stage, []), ui.output()
        assert _port_free(port), (attempt, stage, ui.output())


def _service_url(ui: MakeUi) -> str:
    """The local training service's URL, from its command line (``--port N``)."""
    ports = set()
    for serve in ui.running("aip-local", "serve", "--port"):  # the service (and what it forked)
        with suppress(psutil.Error, ValueError, IndexError):
            argv = serve.cmdline()
            ports.add(argv[argv.index("--port") + 1])
    (port,) = ports
    return f"http://127.0.0.1:{port}/"


def _create_job(ui: MakeUi) -> str:
    """A Vertex AI job on the UI's local service; its page's URL, as the task stores the link."""
    from tests.fixtures.vertex import LOCATION, WORKER_POOL, aiplatform

    url = _service_url(ui)
    body = {"displayName": "link_kept", "jobSpec": {"workerPoolSpecs": [WORKER_POOL]}}
    jobs = aiplatform(url).projects().locations().customJobs()
    job = jobs.create(parent=f"projects/local-project/locations/{LOCATION}", body=body).execute()
    return f"{url}console/{job['name']}"


def _opens(link: str) -> bool:
    """The job's page answers, and is that job's (after ``make ui`` started again, too)."""
    try:
        page = httpx.get(link, timeout=30)
    except httpx.HTTPError:
        return False
    return page.status_code == 200 and link.rsplit("/", 1)[-1] in page.text


def _lasting(p: psutil.Process) -> bool:
    """Not one of the orphan's passing ``sleep 0.1`` (it ends by itself), and not ended."""
    try:
        return bool(p.cmdline() != ["sleep", "0.1"])
    except psutil.Error:
        return False


def _describe(p: psutil.Process) -> str:
    try:
        return f"{p.pid} {' '.join(p.cmdline())}"
    except psutil.Error:
        return f"{p.pid} (gone)"


def test_a_stop_ends_what_ignores_sigterm_and_what_left_the_group(tmp_path: Path) -> None:
    """The stop's other two paths, with real processes (the 10 stops above need neither).

    A process that left the group (a session of its own) and whose parent is gone gets SIGTERM
    by PID: the orphan here says it did. Whatever ignores SIGTERM, in the group or out of it,
    gets SIGKILL once the timeout has passed. Either way nothing is left when ``stop_group``
    returns.
    """
    from scripts.stack import start, stop_group

    mark = tmp_path / "orphan-got-sigterm"
    orphan = f"trap 'echo yes > {mark}; exit 0' TERM; while :; do sleep 0.1; done"
    stubborn = "trap '' TERM; sleep 600"  # SIGTERM ignored, by sleep too (an ignored signal stays so)
    cases = {  # the script, the stop's timeout, how many processes to record (bash included)
        # bash ends on SIGTERM; its child in a session of its own is then an orphan
        "orphan": (f"setsid sh -c {shlex.quote(orphan)} & echo ready; wait", 120.0, 2),
        # all of them ignore SIGTERM: the group, and a child in a session of its own
        "stubborn": (
            f"trap '' TERM; setsid sh -c {shlex.quote(stubborn)} & sleep 600 & echo ready; wait",
            1.0,
            4,
        ),
    }
    for case, (script, timeout, count) in cases.items():
        proc = start(["bash", "-c", script], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        bash, deadline = psutil.Process(proc.pid), time.monotonic() + 60
        tree = [bash]
        while len(tree) < count:  # what the script started, forked but maybe not yet exec'd
            tree = [bash, *(p for p in bash.children(recursive=True) if _lasting(p))]
            if time.monotonic() > deadline:
                pytest.fail(f"{case}: {[_describe(p) for p in tree]} within 60s")
            time.sleep(0.05)
        try:
            stop_group(proc, timeout=timeout)
            assert (case, [_describe(p) for p in tree if _alive(p)]) == (case, [])
        finally:
            for p in tree:
                with suppress(psutil.Error):
                    p.kill()
    assert mark.read_text() == "yes\n"
