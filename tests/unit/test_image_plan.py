"""The trainer image's name: the same build context gives the same tag; bad input is refused first."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.images import registry_auth
from airflow_aip.image_plan import ignored, plan_image


@pytest.fixture
def context(tmp_path: Path) -> Path:
    (tmp_path / "Dockerfile").write_text("FROM python:3.11-slim\nCOPY task.py /task.py\n")
    (tmp_path / "task.py").write_text("print('hello')\n")
    return tmp_path


def test_the_same_bytes_give_the_same_tag_anywhere(
    context: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    twin = tmp_path_factory.mktemp("twin")
    for path in context.iterdir():
        (twin / path.name).write_bytes(path.read_bytes())
    first = plan_image(context, "localhost:5000/team/trainer")
    assert first.uri == f"localhost:5000/team/trainer:{first.tag}"
    assert first.tag.startswith("ctx-")
    assert len(first.tag) == 24
    assert plan_image(twin, "localhost:5000/team/trainer").tag == first.tag


@pytest.mark.parametrize(
    "change",
    ["file", "new file", "executable bit", "dockerfile", "build arg", "target"],
)
def test_anything_the_build_reads_changes_the_tag(context: Path, change: str) -> None:
    before = plan_image(context, "trainer", build_args={"BASE": "a"}).tag
    build_args, target = {"BASE": "a"}, None
    if change == "file":
        (context / "task.py").write_text("print('changed')\n")
    elif change == "new file":
        (context / "data.csv").write_text("x\n")
    elif change == "executable bit":
        (context / "task.py").chmod(0o755)
    elif change == "dockerfile":
        (context / "Dockerfile").write_text("FROM python:3.12-slim\nCOPY task.py /task.py\n")
    elif change == "build arg":
        build_args = {"BASE": "b"}
    else:
        target = "train"
    assert plan_image(context, "trainer", build_args=build_args, target=target).tag != before


def test_dockerignored_files_are_not_part_of_the_tag(context: Path) -> None:
    (context / ".dockerignore").write_text("# notes\n*.log\ndata\n!data/keep.csv\n")
    before = plan_image(context, "trainer").tag
    (context / "run.log").write_text("noise")
    (context / "data").mkdir()
    (context / "data" / "big.bin").write_bytes(b"\0" * 10)
    assert plan_image(context, "trainer").tag == before
    (context / "data" / "keep.csv").write_text("kept")
    assert plan_image(context, "trainer").tag != before


@pytest.mark.parametrize(
    ("path", "rules", "expected"),
    [
        ("a.pyc", [(False, "*.pyc")], True),
        ("pkg/a.pyc", [(False, "*.pyc")], False),  # '*' stops at '/', as in Docker
        ("pkg/sub/a.pyc", [(False, "**/*.pyc")], True),
        ("data/x", [(False, "data"), (True, "data/x")], False),  # the last match decides
        ("dxta", [(False, "d[!a]ta")], True),
    ],
)
def test_dockerignore_patterns_match_as_docker_matches(
    path: str, rules: list[tuple[bool, str]], expected: bool
) -> None:
    assert ignored(path, rules) is expected


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"repository": "trainer:latest"}, "repository"),
        ({"repository": "Trainer"}, "repository"),
        ({"repository": "gcr.io/p/t@sha256:" + "0" * 64}, "repository"),
        ({"repository": ""}, "repository"),
        ({"dockerfile": "Missing.Dockerfile"}, "dockerfile"),
        ({"build_args": {"1BAD": "x"}}, "build_args.1BAD"),
        ({"build_args": {"BASE": 3}}, "build_args.BASE"),
        ({"target": "a b"}, "target"),
        ({"platform": "linux/arm64"}, "platform"),
    ],
)
def test_bad_input_names_its_field(context: Path, kwargs: dict[str, object], field: str) -> None:
    arguments: dict[str, object] = {"repository": "trainer", **kwargs}
    with pytest.raises(ValidationError) as raised:
        plan_image(context, **arguments)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_a_missing_context_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="context_path"):
        plan_image(tmp_path / "nowhere", "trainer")


@pytest.mark.parametrize(
    ("repository", "registry", "google", "loopback"),
    [
        ("us-central1-docker.pkg.dev/p/r/trainer", "us-central1-docker.pkg.dev", True, False),
        ("eu.gcr.io/p/trainer", "eu.gcr.io", True, False),
        ("localhost:5000/trainer", "localhost:5000", False, True),
        ("library/python", "docker.io", False, False),
    ],
)
def test_where_an_image_goes(
    context: Path, repository: str, registry: str, google: bool, loopback: bool
) -> None:
    plan = plan_image(context, repository)
    assert (plan.registry, plan.on_google, plan.on_loopback) == (registry, google, loopback)


def test_a_google_registry_login_is_the_access_token_as_oauth2accesstoken() -> None:
    auth = registry_auth("us-docker.pkg.dev", "ya29.token")
    secret = auth["auths"]["us-docker.pkg.dev"]["auth"]
    assert base64.b64decode(secret).decode() == "oauth2accesstoken:ya29.token"
