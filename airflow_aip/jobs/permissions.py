"""Google's permission refusals, once: their shapes, and the one line that says what to grant.

The three most common first-run failures on Vertex AI are about configuration, not code: the
API disabled in the project, the caller lacking ``iam.serviceAccounts.actAs`` on the job's
``serviceAccount``, and the Vertex AI Custom Code Service Agent unable to read the bucket that
holds the trainer package. The local service answers them on purpose (``aip-local serve
--disable-api``, ``--deny-act-as``, ``--unreadable-bucket``) with the bodies built here; the
hooks read any answer (Google's or the local one) with :func:`permission_advice`, so the rule
that turns a refusal into advice is written once. Neither is worth retrying: nothing changes
until someone grants something.

Sources: ``SERVICE_DISABLED`` is Google's ``google.rpc.ErrorInfo`` (reason, domain
``googleapis.com``, metadata ``service``, ``consumer``, ``activationUrl``) [O public error bodies
of Vertex AI and other APIs]. The actAs wording is IAM's ("Permission '...' denied on ... (or it
may not exist)", reason ``IAM_PERMISSION_DENIED``) [O]; [U] unverified for ``customJobs.create``
(pipelines answer 400 "You do not have permission to act as service_account: ...", python-aiplatform
#1073). The bucket wording is the preflight check's FAILED_PRECONDITION of pipelines and model
uploads [O vertex-ai-samples#3710, statmike/vertex-ai-mlops#60]; [U] unverified that
``customJobs.create`` checks at create rather than failing the job when it starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
HELP = "type.googleapis.com/google.rpc.Help"
ACT_AS = "iam.serviceAccounts.actAs"
SERVICE_TITLES = {
    "aiplatform.googleapis.com": "Vertex AI API",
    "ml.googleapis.com": "AI Platform Training & Prediction API",
    "logging.googleapis.com": "Cloud Logging API",
}
_ACT_AS_TEXT = re.compile(
    r"Permission 'iam\.serviceAccounts\.actAs' denied on service account (?P<sa>\S+)"
    r"|permission to act as service_account: (?P<sa2>[^\s(]+?)\.? \(or it may not exist\)"
)
_CANNOT_READ = re.compile(
    r"Service account `(?P<sa>[^`]+)` does not have `\[(?P<perms>[^\]]+)\]` IAM permission\(s\) to the "
    r"(?:bucket|directory) \"(?P<where>[^\"]+)\""
)


def activation_url(service: str, project_number: str) -> str:
    return f"https://console.developers.google.com/apis/api/{service}/overview?project={project_number}"


def custom_code_agent(project_number: str) -> str:
    """The Vertex AI Custom Code Service Agent: who reads a CustomJob's packages when it starts."""
    return f"service-{project_number}@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"


def ml_service_agent(project_number: str) -> str:
    """AI Platform Training's service agent (ml v1). [U] unverified: that it reads the packages."""
    return f"service-{project_number}@cloud-ml.google.com.iam.gserviceaccount.com"


def service_disabled(service: str, project_number: str) -> dict[str, Any]:
    """Google's 403 for any call to a disabled (or never used) API: the ``error`` object."""
    title = SERVICE_TITLES.get(service, service)
    url = activation_url(service, project_number)
    message = (
        f"{title} has not been used in project {project_number} before or it is disabled. Enable it by "
        f"visiting {url} then retry. If you enabled this API recently, wait a few minutes for the action "
        "to propagate to our systems and retry."
    )
    info = {
        "@type": ERROR_INFO,
        "reason": "SERVICE_DISABLED",
        "domain": "googleapis.com",
        "metadata": {
            "service": service,
            "consumer": f"projects/{project_number}",
            "activationUrl": url,
            "serviceTitle": title,
            "containerInfo": project_number,
        },
    }
    links = {
        "@type": HELP,
        "links": [{"description": "Google developers console API activation", "url": url}],
    }
    return {"code": 403, "message": message, "status": "PERMISSION_DENIED", "details": [info, links]}


def act_as_denied(service_account: str) -> dict[str, Any]:
    """IAM's 403 when the caller may not run a job as ``service_account``: the ``error`` object."""
    resource = f"projects/-/serviceAccounts/{service_account}"
    info = {
        "@type": ERROR_INFO,
        "reason": "IAM_PERMISSION_DENIED",
        "domain": "iam.googleapis.com",
        "metadata": {"permission": ACT_AS, "resource": resource},
    }
    message = f"Permission '{ACT_AS}' denied on service account {service_account} (or it may not exist)."
    return {"code": 403, "message": message, "status": "PERMISSION_DENIED", "details": [info]}


def agent_cannot_read(agent: str, bucket: str) -> dict[str, Any]:
    """The preflight refusal when ``agent`` cannot read ``bucket``: the ``error`` object (400)."""
    message = (
        f"Service account `{agent}` does not have `[storage.objects.get]` IAM permission(s) to the bucket "
        f'"{bucket}". '
        "Please either copy the files to the Google Cloud Storage bucket owned by your project, or grant the "
        "required IAM permission(s) to the service account."
    )
    return {"code": 400, "message": message, "status": "FAILED_PRECONDITION"}


def _error_info(error: Mapping[str, Any]) -> Mapping[str, Any]:
    for detail in error.get("details") or []:
        if isinstance(detail, Mapping) and detail.get("@type") == ERROR_INFO:
            return detail
    return {}


def permission_advice(error: Mapping[str, Any]) -> str | None:
    """What to grant, in one line, for a Google ``error`` object; None if it is no permission refusal."""
    info = _error_info(error)
    metadata = info.get("metadata") or {}
    message = str(error.get("message") or "")
    if info.get("reason") == "SERVICE_DISABLED":
        service = metadata.get("service") or "the API"
        project = str(metadata.get("consumer") or "").removeprefix("projects/") or "the project"
        url = metadata.get("activationUrl") or activation_url(str(service), project)
        return f"Enable {service} in project {project} ({url}): it is disabled there, or was never used."
    act_as = _ACT_AS_TEXT.search(message)
    if metadata.get("permission") == ACT_AS or act_as:
        resource = str(metadata.get("resource", ""))
        account = (act_as and (act_as["sa"] or act_as["sa2"])) or resource.rsplit("/", 1)[-1]
        return (
            f"Grant roles/iam.serviceAccountUser on {account.rstrip('.')} to the caller: running a job as "
            f"that service account needs {ACT_AS}."
        )
    unreadable = _CANNOT_READ.search(message)
    if unreadable:
        where = unreadable["where"]
        uri = where if where.startswith("gs://") else f"gs://{where}"
        return (
            f"Grant roles/storage.objectViewer on {uri} to {unreadable['sa']} (it reads the job's packages), "
            "or stage them in a bucket of the job's project."
        )
    return None
