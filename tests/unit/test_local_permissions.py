"""``aip-local serve``'s permission flags and ``/_permissions`` bodies: read as Google would be asked."""

from __future__ import annotations

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.cli import build_parser
from airflow_aip.local.cli_permissions import permission_settings
from airflow_aip.local.permissions import (
    PermissionRefused,
    Permissions,
    PermissionSettings,
    api_of_path,
    disabled_answer,
)


def test_the_flags_become_the_settings() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--disable-api=aiplatform.googleapis.com",
            "--deny-act-as=a@p.iam.gserviceaccount.com",
            "--unreadable-bucket=gs://locked/",
        ]
    )
    assert permission_settings(args) == PermissionSettings(
        frozenset({"aiplatform.googleapis.com"}),
        frozenset({"a@p.iam.gserviceaccount.com"}),
        frozenset({"locked"}),
    )


@pytest.mark.parametrize(
    "flag", ["--disable-api=compute.googleapis.com", "--deny-act-as=nobody", "--unreadable-bucket=A"]
)
def test_a_malformed_flag_stops_the_service_at_start(flag: str) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", flag])


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/v1/projects/p/locations/us-central1/customJobs", ("aiplatform.googleapis.com", "p")),
        ("/ui/projects/123/locations/us-central1/operations/9", ("aiplatform.googleapis.com", "123")),
        ("/v1/projects/p/jobs/j:cancel", ("ml.googleapis.com", "p")),
        ("/v2/entries:list", ("logging.googleapis.com", "")),
        ("/console/", None),
        ("/_permissions", None),
    ],
)
def test_each_path_belongs_to_its_api(path: str, api: tuple[str, str] | None) -> None:
    assert api_of_path(path) == api


def test_only_the_disabled_api_is_refused_and_a_change_replaces_only_the_lists_named() -> None:
    permissions = Permissions(PermissionSettings(deny_act_as=frozenset({"a@p.iam.gserviceaccount.com"})))
    permissions.update({"disabledApis": ["ml.googleapis.com"]})
    assert disabled_answer(permissions, "/v1/projects/p/locations/l/customJobs", lambda p: "1") is None
    refused = disabled_answer(permissions, "/v1/projects/p/jobs", lambda p: "42")
    assert refused is not None
    assert refused["details"][0]["metadata"]["consumer"] == "projects/42"
    assert permissions.snapshot()["denyActAs"] == ["a@p.iam.gserviceaccount.com"]
    with pytest.raises(PermissionRefused):
        permissions.check_create("agent", "a@p.iam.gserviceaccount.com", [])
    permissions.reset()
    permissions.check_create("agent", "a@p.iam.gserviceaccount.com", ["gs://bucket/p.tar.gz"])  # granted


@pytest.mark.parametrize("body", [[], {"denyActAs": "a@p.iam.gserviceaccount.com"}, {"other": []}])
def test_a_malformed_body_is_refused(body: object) -> None:
    with pytest.raises(ValidationError):
        Permissions(PermissionSettings()).update(body)
