"""Which API method a request calls, by verb and path: what a fault rule aims at and stats count.

Method names are the discovery documents' (``jobs.create``, ``customJobs.get``,
``storage.objects.insert``...), so a test names a call the way Google's clients do.
"""

from __future__ import annotations

import re

ANY_METHOD = "*"
# The creates of every face: ``created`` in the stats counts the jobs applied, whichever API.
CREATE_METHODS = ("jobs.create", "customJobs.create", "hyperparameterTuningJobs.create")
_ROUTES = (
    ("POST", re.compile(r"/v1/projects/[^/]+/jobs"), "jobs.create"),
    ("GET", re.compile(r"/v1/projects/[^/]+/jobs"), "jobs.list"),
    ("GET", re.compile(r"/v1/projects/[^/]+/jobs/[^/:]+"), "jobs.get"),
    ("POST", re.compile(r"/v1/projects/[^/]+/jobs/[^/:]+:cancel"), "jobs.cancel"),
    ("POST", re.compile(r"/v2/entries:list"), "entries.list"),
    # aiplatform v1 (Vertex AI): the discovery document's method names, shortened as ml v1's are.
    *(
        route
        # trainingPipelines: what the SDK's training classes and the Google provider's
        # Create*TrainingJobOperator call.
        for kind in ("customJobs", "hyperparameterTuningJobs", "trainingPipelines")
        for route in (
            ("POST", re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}"), f"{kind}.create"),
            ("GET", re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}"), f"{kind}.list"),
            ("GET", re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}/[^/:]+"), f"{kind}.get"),
            (
                "POST",
                re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}/[^/:]+:cancel"),
                f"{kind}.cancel",
            ),
            ("DELETE", re.compile(rf"/v1/projects/[^/]+/locations/[^/]+/{kind}/[^/:]+"), f"{kind}.delete"),
        )
    ),
    # aiplatform v1 Model Registry. A model segment has no ":" (``m:listVersions`` is a method
    # of ``m``, not a model named so), and each custom method's route comes before the model's.
    ("POST", re.compile(r"/v1/projects/[^/]+/locations/[^/]+/models:upload"), "models.upload"),
    ("GET", re.compile(r"/v1/projects/[^/]+/locations/[^/]+/models"), "models.list"),
    (
        "GET",
        re.compile(r"/v1/projects/[^/]+/locations/[^/]+/models/[^/:]+:listVersions"),
        "models.listVersions",
    ),
    ("GET", re.compile(r"/v1/projects/[^/]+/locations/[^/]+/models/[^/:]+"), "models.get"),
    (
        "POST",
        re.compile(r"/v1/projects/[^/]+/locations/[^/]+/models/[^/:]+:mergeVersionAliases"),
        "models.mergeVersionAliases",
    ),
    (
        "DELETE",
        re.compile(r"/v1/projects/[^/]+/locations/[^/]+/models/[^/:]+:deleteVersion"),
        "models.deleteVersion",
    ),
    (
        "GET",
        re.compile(r"/(?:v1|ui)/projects/[^/]+/locations/[^/]+/(?:models/[^/:]+/)?operations/[^/:]+"),
        "models.operations.get",
    ),
    # Cloud Storage JSON API, as the proxy in front of fake-gcs-server sees it (airflow_aip.local.
    # gcs_proxy). Paths are percent-decoded, so an object name may hold slashes: first match wins.
    # Uploads (multipart, resumable initiation, resumable data) are all objects.insert; media
    # downloads (objects.get with alt=media) are named apart, so a test can aim at either.
    ("POST", re.compile(r"/upload/storage/v1/b/[^/]+/o"), "storage.objects.insert"),
    ("PUT", re.compile(r"/upload/storage/v1/b/[^/]+/o"), "storage.objects.insert"),
    ("POST", re.compile(r"/storage/v1/b/[^/]+/o/.+/rewriteTo/b/[^/]+/o/.+"), "storage.objects.rewrite"),
    ("POST", re.compile(r"/storage/v1/b/[^/]+/o/.+/copyTo/b/[^/]+/o/.+"), "storage.objects.copy"),
    ("POST", re.compile(r"/storage/v1/b/[^/]+/o/.+/compose"), "storage.objects.compose"),
    ("GET", re.compile(r"/download/storage/v1/b/[^/]+/o/.+"), "storage.objects.download"),
    ("GET", re.compile(r"/storage/v1/b/[^/]+/o/.+"), "storage.objects.get"),
    ("PATCH", re.compile(r"/storage/v1/b/[^/]+/o/.+"), "storage.objects.patch"),
    ("DELETE", re.compile(r"/storage/v1/b/[^/]+/o/.+"), "storage.objects.delete"),
    ("GET", re.compile(r"/storage/v1/b/[^/]+/o"), "storage.objects.list"),
    ("POST", re.compile(r"/storage/v1/b/[^/]+/o"), "storage.objects.insert"),
    ("GET", re.compile(r"/storage/v1/b/[^/]+"), "storage.buckets.get"),
    ("DELETE", re.compile(r"/storage/v1/b/[^/]+"), "storage.buckets.delete"),
    ("GET", re.compile(r"/storage/v1/b"), "storage.buckets.list"),
    ("POST", re.compile(r"/storage/v1/b"), "storage.buckets.insert"),
)
METHODS = tuple(dict.fromkeys(name for _, _, name in _ROUTES))
_MEDIA = re.compile(r"(^|&)alt=media(&|$)")


def api_method(verb: str, path: str, query: str = "") -> str | None:
    """The API method a request calls (``jobs.create``...), None for anything else (health checks)."""
    for route_verb, pattern, name in _ROUTES:
        if verb == route_verb and pattern.fullmatch(path):
            if name == "storage.objects.get" and _MEDIA.search(query):
                return "storage.objects.download"
            return name
    return None
