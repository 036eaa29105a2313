"""The one loopback rule (:func:`airflow_aip.uris.is_loopback`), and the three places that read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_aip.engines import loopback_registry
from airflow_aip.image_plan import plan_image
from airflow_aip.uris import is_loopback


@pytest.mark.parametrize(
    ("address", "local"),
    [
        ("127.0.0.2", True),  # all of 127.0.0.0/8, not only 127.0.0.1
        ("127.0.0.2:5000", True),
        ("[::1]:5000", True),
        ("[::1]", True),
        ("::1", True),
        ("localhost:5000", True),
        ("localhost", True),  # no port
        ("http://127.0.0.2:8080/", True),
        ("example.com", False),
        ("us-docker.pkg.dev:443", False),
        ("localhost.example.com:5000", False),
        ("10.0.0.1", False),
        ("", False),
    ],
)
def test_the_one_loopback_rule(address: str, local: bool) -> None:
    assert is_loopback(address) is local


@pytest.mark.parametrize(
    ("image", "loopback"),
    [
        ("127.0.0.2:5000/x", True),
        ("[::1]:5000/x", True),
        ("localhost:5000/x", True),
        ("localhost/x", False),  # podman's own store, not a registry: a registry needs a port
        ("us-docker.pkg.dev/p/r/x", False),
    ],
)
def test_an_engine_pulls_over_plain_http_from_a_loopback_registry(image: str, loopback: bool) -> None:
    assert loopback_registry(image) is loopback


@pytest.mark.parametrize(
    ("repository", "loopback"),
    [
        ("127.0.0.2:5000/x", True),
        ("localhost:5000/x", True),
        ("localhost/x", True),  # ([::1] is no host in the reference grammar: check_repository refuses it)
        ("us-docker.pkg.dev/p/r/x", False),
    ],
)
def test_an_image_plan_pushes_over_plain_http_to_a_loopback_registry(
    tmp_path: Path, repository: str, loopback: bool
) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    assert plan_image(tmp_path, repository).on_loopback is loopback
