"""Under CI a missing tool fails, it never skips (tests/fixtures/tools.py), shown on pytest itself.

Each case runs pytest in a subprocess on a tiny test file, with only the plugins it names (not
tests/conftest.py, so it starts in about a second): a container test on a PATH without podman or
docker, with ``CI=true`` and without, and a plain skip under CI, which the net fails (about 1.5 s each).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.tools import under_ci

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_TEST = """
pytest_plugins = ["tests.fixtures.containers"]


def test_needs_an_engine(container_engine):
    pass
"""
SKIPPING_TEST = """
import pytest

pytest_plugins = ["tests.fixtures.tools"]


def test_runs():
    pass


def test_skips():
    pytest.skip("no frobnicator here")
"""


def _pytest(tmp_path: Path, source: str, ci: str | None) -> subprocess.CompletedProcess[str]:
    """pytest on ``source`` with a PATH of one empty directory: no podman, no docker."""
    (tmp_path / "test_tiny.py").write_text(source)
    (tmp_path / "bin").mkdir()
    env = {
        "PATH": str(tmp_path / "bin"),
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        **({"CI": ci} if ci is not None else {}),
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_tiny.py"]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def test_under_ci_a_container_test_without_podman_fails_naming_it(tmp_path: Path) -> None:
    run = _pytest(tmp_path, CONTAINER_TEST, "true")
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    assert "1 error" in run.stdout
    assert "a container engine (podman, or a docker that runs) is missing" in run.stdout
    assert "make prepare (scripts/debian_deps.sh containers, as root) installs it" in run.stdout
    assert "under CI a missing tool fails, it never skips" in run.stdout


def test_elsewhere_it_skips_saying_what_to_install(tmp_path: Path) -> None:
    run = _pytest(tmp_path, CONTAINER_TEST, None)
    assert run.returncode == pytest.ExitCode.OK, run.stdout + run.stderr
    assert "1 skipped" in run.stdout
    assert "podman" in run.stdout
    assert "make prepare" in run.stdout


def test_under_ci_any_skip_fails_the_run(tmp_path: Path) -> None:
    run = _pytest(tmp_path, SKIPPING_TEST, "true")
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    assert "1 passed, 1 skipped" in run.stdout
    listed = run.stdout.split("skipped under CI, so the run fails", 1)[1]
    assert "test_tiny.py::test_skips: no frobnicator here" in listed


@pytest.mark.parametrize(
    ("value", "ci"), [("true", True), ("1", True), ("yes", True), ("", False), ("false", False)]
)
def test_ci_is_any_value_but_an_empty_or_false_one(
    monkeypatch: pytest.MonkeyPatch, value: str, ci: bool
) -> None:
    monkeypatch.setenv("CI", value)
    assert under_ci() is ci
