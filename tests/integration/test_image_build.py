"""The image hook on this machine's engine: a failed build says why and pushes nothing."""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from airflow_aip.exceptions import ImageBuildError
from airflow_aip.hooks.images import ContainerImageHook
from airflow_aip.image_plan import plan_image
from airflow_aip.local.executor.containers import ContainerEngine
from tests.fixtures.containers import BASE


def test_a_failed_build_raises_the_engines_last_lines_and_pushes_nothing(
    container_engine: ContainerEngine, base_image: str, local_registry: str, tmp_path: Path
) -> None:
    recipe = f"FROM {BASE}\nRUN echo 'no such wheel: trainer-deps' >&2 && exit 3\n"
    (tmp_path / "Dockerfile").write_text(recipe)
    name = f"aip-tests-{uuid.uuid4().hex[:8]}/broken"
    plan = plan_image(tmp_path, f"{local_registry}/{name}")
    hook = ContainerImageHook(container_engine.name, gcp_conn_id=None)
    assert hook.in_registry(plan) is False
    with pytest.raises(ImageBuildError, match="no such wheel: trainer-deps") as raised:
        hook.build(plan)
    assert "exited" in str(raised.value)
    assert not hook.has_locally(plan.uri)
    url = f"http://{local_registry.replace('localhost', '127.0.0.1')}/v2/{name}/tags/list"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(url)
    assert missing.value.code == 404


def test_a_build_and_its_push_are_logged_as_they_happen(
    container_engine: ContainerEngine,
    base_image: str,
    local_registry: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Issue 52: ``build_image``'s log showed 3 lines for a 7 s push; each line of the engine's
    build steps and push progress is now in the task log, after ``build:`` or ``push:``."""
    caplog.set_level("INFO")
    (tmp_path / "Dockerfile").write_text(f"FROM {BASE}\nRUN echo built-here > /built\n")
    plan = plan_image(tmp_path, f"{local_registry}/aip-tests-{uuid.uuid4().hex[:8]}/logged")
    hook = ContainerImageHook(container_engine.name, gcp_conn_id=None)
    hook.build(plan)
    digest = hook.push(plan)
    said = caplog.text + "".join(capfd.readouterr())
    build_lines = [line for line in said.splitlines() if "build: " in line]
    push_lines = [line for line in said.splitlines() if "push: " in line]
    assert any("RUN echo built-here" in line for line in build_lines), said
    assert push_lines, said  # the layers and the manifest, as the engine reports them
    assert digest.startswith("sha256:")
