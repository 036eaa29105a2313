"""Google's permission refusals and the one line of advice each becomes (the model's rule, once).

The local service's bodies and Google's observed ones (public error bodies, quoted in the
model's docstring) must both turn into a line naming what to grant; other errors must not.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.exceptions import ApiError, PermissionRefusedError
from airflow_aip.hooks.http_shared import api_error, is_transient
from airflow_aip.jobs.permissions import (
    act_as_denied,
    agent_cannot_read,
    custom_code_agent,
    permission_advice,
    service_disabled,
)

SA = "trainer@proj.iam.gserviceaccount.com"


def test_a_disabled_api_says_which_api_to_enable_in_which_project() -> None:
    error = service_disabled("aiplatform.googleapis.com", "123456789012")
    assert (error["code"], error["status"]) == (403, "PERMISSION_DENIED")
    assert error["message"].startswith("Vertex AI API has not been used in project 123456789012")
    info = error["details"][0]
    assert (info["reason"], info["domain"]) == ("SERVICE_DISABLED", "googleapis.com")
    assert info["metadata"]["consumer"] == "projects/123456789012"
    assert permission_advice(error) == (
        "Enable aiplatform.googleapis.com in project 123456789012 (https://console.developers.google.com"
        "/apis/api/aiplatform.googleapis.com/overview?project=123456789012): it is disabled there, or was "
        "never used."
    )


@pytest.mark.parametrize(
    "error",
    [
        act_as_denied(SA),
        {
            "code": 400,
            "status": "INVALID_ARGUMENT",
            "message": f"You do not have permission to act as service_account: {SA}. (or it may not exist).",
        },  # pipelines' wording [O]
    ],
)
def test_a_denied_act_as_says_to_grant_service_account_user(error: dict[str, Any]) -> None:
    assert permission_advice(error) == (
        f"Grant roles/iam.serviceAccountUser on {SA} to the caller: running a job as that service "
        "account needs iam.serviceAccounts.actAs."
    )


def test_an_unreadable_bucket_names_the_agent_and_the_bucket() -> None:
    agent = custom_code_agent("42")
    assert agent == "service-42@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"
    assert permission_advice(agent_cannot_read(agent, "locked")) == (
        f"Grant roles/storage.objectViewer on gs://locked to {agent} (it reads the job's packages), or "
        "stage them in a bucket of the job's project."
    )


def test_other_errors_give_no_advice_and_stay_plain_api_errors() -> None:
    assert permission_advice({"code": 403, "message": "The caller does not have permission"}) is None
    assert permission_advice({"code": 400, "message": "List of found errors: 1.Field: x"}) is None
    plain = api_error(403, "The caller does not have permission", "customJobs.create", b"not json")
    assert type(plain) is ApiError


def test_a_refusal_is_one_line_of_advice_and_never_retried() -> None:
    import json

    body = json.dumps({"error": act_as_denied(SA)}).encode()
    refused = api_error(403, act_as_denied(SA)["message"], "customJobs.create", body)
    assert isinstance(refused, PermissionRefusedError)
    assert str(refused).startswith(f"Grant roles/iam.serviceAccountUser on {SA} to the caller")
    assert "\n" not in str(refused)
    assert refused.message.startswith("Permission 'iam.serviceAccounts.actAs' denied")
    assert is_transient(refused) is False
