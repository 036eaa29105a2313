"""`make ui` stops whole: SIGTERM to its process group ends everything it started, at any stage.

How a user's tooling (or CI) stops it: SIGTERM to the process group of ``make ui``. GNU make
forwards that SIGTERM to the UI script, which so gets it twice at once; before, the second one
cut the cleanup short and left the whole ``airflow standalone`` group (scheduler,
dag-processor, triggerer, api-server and their workers) running, 4 stops in 9.

Each test runs the Makefile's ``ui`` recipe through make itself (``make -o install -o gcs-fuse
ui``: the prerequisites are not remade, a test must not reinstall the venv or apt-get), as a
process group of its own with no stdin, in a home and on a port of its own, and stops it with
that double SIGTERM at a stage of its start. While it runs, every process under make is
recorded by PID (psutil: the local service, fake-gcs-server, ``airflow db migrate``, ``airflow
standalone`` and everything under it); when make has exited, none of them may be running (a
zombie counts as ended: it holds nothing and its parent reaps it) and the port must be free to
listen on, as the next ``make ui`` will.

In ``make test``:

- One real start, in a fresh home, stopped once ready (the greeting printed: the api-server
  answers, the login exists, the whole standalone group runs, and the home's PostgreSQL, the
  metadata DB, with it). It also checks that the example
  chain's Dags were created unpaused, so a run of aip_prepare_data starts aip_retraining, and
  that a job's link on the local service opens.
- The stages of the start, against a stand-in ``airflow`` (tests/fixtures/stub_airflow/
  airflow.py: a ``db migrate`` that can be held, a ``standalone`` that forks a tree like the real
  one: a child in a session of its own that takes a while to end, one that ignores SIGTERM (and
  ends once its parent has), an api-server that holds the port a while after SIGTERM).
  Everything else is the real thing: make, scripts/ui.py, scripts/stack.py, ``aip-local serve``
  and fake-gcs-server (the metadata DB is SQLite: as root, nobody, whom PostgreSQL runs as,
  cannot enter pytest's tmp dir). The stop comes right after the local
  service started, during the migration, when ``airflow standalone``'s tree runs but its
  api-server does not answer yet, and once the greeting is printed; then once more at "ready"
  with a third SIGTERM while the stop runs (a second Ctrl-C, a repeated kill): it must wait for
  the stop, not cut it short (make's own forwarded SIGTERM comes within milliseconds, often
  before the first is handled, so it does not prove that every time). How the stand-in is put in:
  the stack runs ``airflow`` from its interpreter's bin/ (first on PATH), and the Makefile runs
  ``$(BIN)/python``; so the test runs ``make BIN=<venv>/bin``, a throwaway venv of the same base
  interpreter whose site-packages points at the project venv's (a .pth file: every package, and
  the editable airflow_aip, import as they are) and whose bin/ has the stub ``airflow`` and the
  real ``aip-local``. No product file knows of it.
- The stop's paths these stops do not take: SIGKILL after the timeout, and SIGTERM to a process
  outside the group whose parent is gone.

In ``make test-soak`` (``soak``): the real stack stopped 10 times in a row in one home, each
stop at a stage of the start, so that the 10 cover the whole start without 10 full starts (one
is 15-30 s here): 4 when the greeting is printed, 4 when ``airflow standalone`` has started its
four components but the api-server does not answer yet, 1 during the metadata DB migration and
1 right after the local service started. The first stop, the stack's first start in a fresh home,
also checks that the example chain's Dags were created unpaused; at each ready stop a job's
stored link, made at the first start, opens (the service keeps its port between starts).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from airflow_aip.local.ports import free_port
from scripts.stack import BIN, REPO
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration

# Where in the start each soak stop comes, in order (see above): 4 of 10 with the UI up.
STAGES = [
    *("ready", "service", "standalone", "ready", "migrate"),
    *("standalone", "ready", "standalone", "ready", "standalone"),
]
CHAIN = ("aip_prepare_data", "aip_retraining")  # the Asset chain the README promises in make ui
START_TIMEOUT = 300.0  # a bound to fail on rather than hang, never an assertion

STUB = Path(__file__).resolve().parent.parent / "fixtures" / "stub_airflow" / "airflow.py"
# What the stand-in holds at each stage (STUB_AIRFLOW_HOLD), so the stop surely comes there.
STUB_HOLDS = {"service": "", "migrate": "migrate", "standalone": "api", "ready": ""}
# Each stage stopped once; at "ready" once more with a third SIGTERM while the stop runs (the
# stand-in's dag-processor, in a session of its own, takes 2 s to end): a signal that cut the
# stop short instead of waiting for it would leave that orphan running.
STUB_CASES = [*((stage, False) for stage in STUB_HOLDS), ("ready", True)]
# The stand-in's ``airflow standalone`` tree, by component (the word after its ``airflow``).
STUB_TREE = {"standalone", "scheduler", "worker", "dag-processor", "triggerer", "api-server"}


def _ui_env(home: Path) -> dict[str, str]:
    """``make ui``'s environment: its own home and ports, nothing inherited from an outer make."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return {
        **env,
        "AIP_UI_HOME": str(home),
        "AIP_UI_PORT": str(free_port()),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    }


class MakeUi:
    """One ``make ui`` in a process group of its own, and every process seen under it, by PID.

    ``bin_dir``: the Makefile's BIN (whose ``python`` runs scripts/ui.py), if not the project's.
    """

    def __init__(self, env: dict[str, str], out: Path, bin_dir: Path | None = None) -> None:
        self.out = out
        argv = ["make", "--no-print-directory", "-o", "install", "-o", "gcs-fuse"]
        argv += [f"BIN={bin_dir}"] if bin_dir else []
        with out.open("wb") as sink:
            self.proc = subprocess.Popen(
                [*argv, "ui"],
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
        def reached() -> bool:
            self.look()
            if condition():
                self.look()
                return True
            if self.proc.poll() is not None:
                pytest.fail(f"make ui exited ({self.proc.returncode}) before {stage}:\n{self.output()}")
            return False

        wait_until(reached, START_TIMEOUT, f"make ui at {stage}", state=self.output)

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

    def stop(self, again: Callable[[], bool] | None = None) -> bool:
        """SIGTERM to make's process group, as ``kill -TERM -<pgid>`` does; wait for make to exit.

        ``again``: once it holds (the stop is under way), SIGTERM to the group once more, as a
        second Ctrl-C or a repeated ``kill`` would. Returns whether that SIGTERM was sent.
        """
        os.killpg(self.proc.pid, signal.SIGTERM)
        sent_again = False

        def exited() -> bool:
            nonlocal sent_again
            self.look()  # keep looking: what forks while it stops is recorded too
            if self.proc.poll() is not None:
                return True
            if again is not None and not sent_again and again():
                with suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGTERM)
                    sent_again = True
            return False

        wait_until(exited, START_TIMEOUT, "exit of make ui after SIGTERM", every=0.1, state=self.output)
        return sent_again

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


def _stopped_whole(ui: MakeUi, port: int, label: object, leftovers: list[psutil.Process]) -> None:
    """After the stop: none of the recorded processes runs, and the port is free."""
    left = ui.alive()
    leftovers += left
    assert (label, [_describe(p) for p in left]) == (label, []), ui.output()
    assert _port_free(port), (label, ui.output())


def _is_paused(env: dict[str, str], dag_ids: tuple[str, ...]) -> dict[str, bool]:
    """Each Dag's ``is_paused``, through the REST API as admin, once the dag-processor has parsed it."""
    base = f"http://127.0.0.1:{env['AIP_UI_PORT']}"
    passwords = Path(env["AIP_UI_HOME"]) / "simple_auth_manager_passwords.json.generated"
    login = {"username": "admin", "password": json.loads(passwords.read_text())["admin"]}
    with httpx.Client(base_url=base, timeout=30) as http:
        token = http.post("/auth/token", json=login).raise_for_status().json()["access_token"]
        http.headers["authorization"] = f"Bearer {token}"
        paused = {}
        for dag_id in dag_ids:

            def parsed(dag_id: str = dag_id) -> dict[str, Any]:
                answer = http.get(f"/api/v2/dags/{dag_id}")
                return {} if answer.status_code == 404 else dict(answer.raise_for_status().json())

            paused[dag_id] = bool(wait_until(parsed, START_TIMEOUT, f"{dag_id} parsed", every=1)["is_paused"])
    return paused


@pytest.fixture
def leftovers() -> Iterator[list[psutil.Process]]:
    """What a failed run leaves: SIGKILLed by PID afterwards, so a failure does not linger."""
    left: list[psutil.Process] = []
    yield left
    for p in left:
        with suppress(psutil.Error):
            p.kill()


def test_sigterm_to_a_ready_make_ui_ends_everything(
    postgres_home: Path, tmp_path: Path, leftovers: list[psutil.Process]
) -> None:
    """The real stack, started once in a fresh home, stopped once its greeting is printed."""
    home = postgres_home
    env = _ui_env(home)
    ui = MakeUi(env, tmp_path / "make-ui.out")
    try:
        ui.wait_for("ready", _at(ui, "ready"))
        assert _is_paused(env, CHAIN) == dict.fromkeys(CHAIN, False)  # created now, unpaused
        link = _create_job(ui)
        assert _opens(link), (link, ui.output())
        standalone = ui.running("airflow", "standalone")
        postgres = ui.running("postgres", "-D", str(home / "postgres"))  # the metadata DB (issue 47)
        running = len(ui.alive())
    finally:
        ui.stop()
    assert standalone, ui.output()
    assert postgres, ui.output()
    assert running > 4  # make, the UI script, the service and the standalone group were seen
    _stopped_whole(ui, int(env["AIP_UI_PORT"]), "ready", leftovers)


@pytest.fixture(scope="module")
def stub_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway venv's bin/: the project venv's packages, the stand-in ``airflow``, the real
    ``aip-local``. As the Makefile's BIN, scripts/ui.py runs on its ``python`` and the stack
    starts its ``airflow`` (scripts.stack puts ``Path(sys.executable).parent`` first on PATH)."""
    root = tmp_path_factory.mktemp("stub-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site_dir = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_path(name) for name in ("purelib", "platlib"))
    lines = "".join(f"import site; site.addsitedir({path!r})\n" for path in ours)
    (Path(site_dir) / "aip_project_venv.pth").write_text(lines)
    airflow = root / "bin" / "airflow"
    airflow.write_text(f"#!{python} -S\n{STUB.read_text()}")
    airflow.chmod(0o755)
    (root / "bin" / "aip-local").symlink_to(BIN / "aip-local")
    return root / "bin"


def _stub_tree(ui: MakeUi, airflow: Path) -> dict[str, list[psutil.Process]]:
    """The stand-in's processes running under make, by component (``db`` for ``db migrate``)."""
    found: dict[str, list[psutil.Process]] = {}
    for p in ui.alive():
        with suppress(psutil.Error):
            argv = p.cmdline()
            if str(airflow) in argv:
                found.setdefault(argv[argv.index(str(airflow)) + 1], []).append(p)
    return found


@pytest.mark.parametrize(
    ("stage", "again"), STUB_CASES, ids=[f"{s}{'-sigterm-again-while-stopping' * a}" for s, a in STUB_CASES]
)
def test_sigterm_at_a_stage_of_the_start_ends_everything(
    stage: str, again: bool, stub_bin: Path, tmp_path: Path, leftovers: list[psutil.Process]
) -> None:
    """The stand-in ``airflow`` (module docstring): each stage of the start, stopped, cheaply."""
    env = {**_ui_env(tmp_path / "home"), "STUB_AIRFLOW_HOLD": STUB_HOLDS[stage]}
    ui = MakeUi(env, tmp_path / "make-ui.out", bin_dir=stub_bin)
    airflow, at_stage = stub_bin / "airflow", _at(ui, stage)
    # From "standalone" on: the stand-in's whole tree runs (its scheduler's worker forks last).
    expected: set[str] = {"service": set(), "migrate": {"db"}}.get(stage, STUB_TREE)
    leader: list[psutil.Process] = []  # the stand-in's `airflow standalone`
    try:
        ui.wait_for(stage, lambda: at_stage() and _stub_tree(ui, airflow).keys() >= expected)
        on_stub = ui.running(str(stub_bin / "python"), "scripts/ui.py")  # the UI script, on BIN's python
        tree = _stub_tree(ui, airflow)
        greeted = "Airflow UI:" in ui.output()
        running = len(ui.alive())
        leader = _stub_tree(ui, airflow).get("standalone", [])
    finally:
        # again: once the stop has ended the stand-in's `airflow standalone` (the rest of its
        # tree is still being stopped then)
        sent_again = ui.stop((lambda: not any(_alive(p) for p in leader)) if again else None)
    assert sent_again == again, ui.output()
    assert on_stub, ui.output()
    assert tree.keys() >= expected, (tree, ui.output())
    if stage == "ready":  # the greeting has the password from the stand-in's passwords file
        assert "password:    stub-admin-password" in ui.output(), ui.output()
    else:
        assert not greeted, ui.output()
    assert running > 2  # make, the UI script and what it started were seen
    _stopped_whole(ui, int(env["AIP_UI_PORT"]), stage, leftovers)
    # a stop on purpose is no failure: the script exits 0 (make reports a recipe's 143 as an error)
    assert "Stopped: Airflow and the local training service are no longer running." in ui.output()
    assert "Error 143" not in ui.output(), ui.output()


@pytest.mark.soak
@pytest.mark.timeout(1500)  # 10 starts of the whole stack: 270 s alone, 852 s beside the suite
def test_sigterm_to_make_ui_ends_everything_it_started_every_time(
    postgres_home: Path, tmp_path: Path, leftovers: list[psutil.Process]
) -> None:
    home = postgres_home
    ui_env = _ui_env(home)
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
        assert running > 2, (attempt, stage)  # make, the UI script and what it started were seen
        _stopped_whole(ui, port, (attempt, stage), leftovers)


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
    """The stop's other two paths, with real processes (the stops above need neither).

    A process that left the group (a session of its own) and whose parent is gone gets SIGTERM
    by PID: the orphan here says it did. Whatever ignores SIGTERM, in the group or out of it,
    gets SIGKILL once the timeout has passed. Either way nothing is left when ``stop_group``
    returns.
    """
    from scripts.stack import start, stop_group

    mark = tmp_path / "orphan-got-sigterm"
    armed = tmp_path / "orphan-trap-set"  # a SIGTERM before its trap is set would end it unmarked
    orphan = f"trap 'echo yes > {mark}; exit 0' TERM; : > {armed}; while :; do sleep 0.1; done"
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
        tree = [psutil.Process(proc.pid)]  # bash, then what it started

        def recorded(tree: list[psutil.Process] = tree, count: int = count) -> bool:
            # what the script started, forked but maybe not yet exec'd
            tree[1:] = [p for p in tree[0].children(recursive=True) if _lasting(p)]
            return len(tree) >= count

        def state(tree: list[psutil.Process] = tree) -> list[str]:
            return [_describe(p) for p in tree]

        try:
            wait_until(recorded, 60, f"{case}: {count} processes", every=0.05, state=state)
            if case == "orphan":
                wait_until(armed.exists, 60, "the orphan's SIGTERM trap", every=0.05)
            stop_group(proc, timeout=timeout)
            assert (case, [_describe(p) for p in tree if _alive(p)]) == (case, [])
        finally:
            for p in tree:
                with suppress(psutil.Error):
                    p.kill()
    assert mark.read_text() == "yes\n"
