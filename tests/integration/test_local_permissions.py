"""Permission refusals on purpose: a disabled API, a denied ``actAs``, a bucket the agent cannot read.

One ``aip-local serve`` for the module, started with ``--deny-act-as`` and ``--fault-admin``; the
other refusals are set at ``/_permissions`` by the test that needs them and cleared after it.
Google's Vertex AI SDK sees Google's bodies; our submit operator turns each into one line that
names what to grant, after exactly one create (a refusal is never retried).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from airflow_aip.exceptions import PermissionRefusedError
from airflow_aip.jobs.permissions import custom_code_agent
from airflow_aip.local.store import project_number
from tests.fixtures.local_service import LocalService, StagedTrainer, own_service
from tests.fixtures.operators import FakeTI, task_context
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import IMAGE, LOCATION, vertex_sdk

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")
DENIED = "no-act-as@perm-tests.iam.gserviceaccount.com"

permissions_service = own_service("permissions_service", ["--fault-admin", f"--deny-act-as={DENIED}"])


@pytest.fixture
def project() -> str:
    return f"perm-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def refusing(permissions_service: LocalService) -> Iterator[LocalService]:
    """The service, granted everything but the flag's ``actAs`` again once the test is done."""
    try:
        yield permissions_service
    finally:
        permissions_service.admin("_permissions", {"disabledApis": [], "unreadableBuckets": []}, "POST")


@pytest.fixture
def sdk(
    refusing: LocalService, staged_trainer: StagedTrainer, project: str, monkeypatch: pytest.MonkeyPatch
) -> Any:
    with vertex_sdk(refusing.url, project, staged_trainer.bucket, monkeypatch) as client:
        yield client


def _job(sdk: Any, trainer: StagedTrainer) -> Any:
    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "python_package_spec": {
            "executor_image_uri": IMAGE,
            "package_uris": [trainer.package_uri],
            "python_module": "aip_test_trainer.succeed",
        },
    }
    return sdk.CustomJob(display_name="perm", worker_pool_specs=[pool])


def _submit(
    service: LocalService, trainer: StagedTrainer, project: str, backend: str = "vertex", **extra: Any
) -> Any:
    from airflow_aip.operators.training import SubmitTrainingJobOperator

    operator = SubmitTrainingJobOperator(
        task_id="submit",
        project_id=project,
        region=LOCATION,
        training_input=trainer.training_input("succeed", **extra),
        api_endpoint=service.url,
        gcp_conn_id="aip_no_such_conn",
        wait_for_completion=False,
        backend=backend,
    )
    context = task_context(FakeTI(f"perm_{uuid.uuid4().hex[:6]}", "submit"), datetime(2026, 3, 9, 7, 5, 1))
    return operator.execute(context)  # type: ignore[arg-type]


def _requests(service: LocalService, project: str) -> int:
    return sum(service.admin(f"_stats?project={project}")["requests"].values())


def _creates(service: LocalService, project: str) -> int:
    return int(service.admin(f"_stats?project={project}")["requests"].get("customJobs.create", 0))


def test_the_flag_denies_act_as_with_iams_403(
    sdk: Any, refusing: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    from google.api_core.exceptions import Forbidden

    assert refusing.admin("_permissions")["denyActAs"] == [DENIED]
    with pytest.raises(Forbidden, match=r"Permission 'iam.serviceAccounts.actAs' denied") as refused:
        _job(sdk, staged_trainer).run(service_account=DENIED)
    assert (refused.value.reason, refused.value.domain) == ("IAM_PERMISSION_DENIED", "iam.googleapis.com")

    with pytest.raises(PermissionRefusedError) as one_line:
        _submit(refusing, staged_trainer, project, serviceAccount=DENIED)
    assert str(one_line.value) == (
        f"Grant roles/iam.serviceAccountUser on {DENIED} to the caller: running a job as that service "
        "account needs iam.serviceAccounts.actAs."
    )
    assert _creates(refusing, project) == 2  # the SDK's one and the operator's one: never retried


def test_a_disabled_api_answers_service_disabled_to_every_call(
    sdk: Any, refusing: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    from google.api_core.exceptions import Forbidden

    refusing.admin("_permissions", {"disabledApis": ["aiplatform.googleapis.com"]}, "POST")
    number = project_number(project)

    with pytest.raises(Forbidden, match=f"Vertex AI API has not been used in project {number}") as refused:
        list(sdk.Model.list())
    assert (refused.value.reason, refused.value.domain) == ("SERVICE_DISABLED", "googleapis.com")
    assert refused.value.metadata["service"] == "aiplatform.googleapis.com"

    before = _requests(refusing, project)
    with pytest.raises(PermissionRefusedError) as one_line:
        _submit(refusing, staged_trainer, project)
    assert str(one_line.value).startswith(f"Enable aiplatform.googleapis.com in project {number} (")
    assert _requests(refusing, project) == before + 1  # its first call refused, and not sent again


def test_an_unreadable_package_bucket_is_refused_naming_the_service_agent(
    sdk: Any, refusing: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    from google.api_core.exceptions import BadRequest

    refusing.admin("_permissions", {"unreadableBuckets": [staged_trainer.bucket]}, "POST")
    agent = custom_code_agent(project_number(project))

    with pytest.raises(BadRequest, match=f"Service account `{agent}` does not have") as refused:
        _job(sdk, staged_trainer).run()
    assert refused.value.response.json()["error"]["status"] == "FAILED_PRECONDITION"

    with pytest.raises(PermissionRefusedError) as one_line:
        _submit(refusing, staged_trainer, project)
    assert str(one_line.value).startswith(
        f"Grant roles/storage.objectViewer on gs://{staged_trainer.bucket} to {agent}"
    )
    assert _creates(refusing, project) == 2


def test_ml_v1_refuses_the_same_service_account_in_the_same_one_line(
    refusing: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    with pytest.raises(PermissionRefusedError) as one_line:
        _submit(refusing, staged_trainer, project, backend="ai_platform", serviceAccount=DENIED)
    assert str(one_line.value).startswith(f"Grant roles/iam.serviceAccountUser on {DENIED} to the caller")
    assert int(refusing.admin(f"_stats?project={project}")["requests"].get("jobs.create", 0)) == 1
