"""The fake API's jobs: when each changes state, and how ml v1 and Vertex AI answer it.

A job's clock starts the first time a request names it (a get, or a list filter): it is QUEUED,
RUNNING from a quarter of its ``delay`` on, and SUCCEEDED ``delay`` seconds after. Times are
integer microseconds, exact in every answer (``startTime``, ``endTime``, Vertex's
``updateTime``), so a watcher can tell how late it saw the end, and the log schedule
(:mod:`bench.trigger_api_logs`) can count the lines written up to it without rounding.

Both list methods are served as Google serves them: a filter (parsed by the local service's own
parser, with each method's filterable fields, so a filter Google would refuse is a 400 here),
newest first, at most 100 jobs a page, ``nextPageToken``. To stay cheap at 5,000 jobs, a filter
made only of positive terms is matched against the jobs its quoted values name, not all of them.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.labels import JOB_ID_LABEL, sanitize_label_value
from airflow_aip.local.logs.filters import (
    ML_JOB_FILTER_FIELDS,
    VERTEX_JOB_FILTER_FIELDS,
    Comparison,
    FilterFields,
    Junction,
    Negation,
    Node,
    parse_filter,
)
from airflow_aip.local.store import project_number

MAX_PAGE_SIZE = 100  # both jobs.list methods answer at most 100 jobs a page
REGION = "us-central1"
VERTEX_ID_BASE = 4_000_000_000_000_000_000  # Vertex job IDs are large numbers
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def now_us() -> int:
    return time.time_ns() // 1000


def rfc3339_us(micros: int, nanos: bool = False) -> str:
    """``2026-01-01T00:00:00.123456Z`` (``...123456000Z`` with ``nanos``, as Cloud Logging writes)."""
    moment = datetime.fromtimestamp(micros // 1_000_000, timezone.utc)
    fraction = f"{micros % 1_000_000:06d}" + ("000" if nanos else "")
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{fraction}Z"


@dataclass
class Job:
    """One job of the fleet: its names, its schedule (set when first named) and its log rhythm."""

    job_id: str  # our ID: ml v1's jobId, Vertex's displayName and aip_job_id label
    index: int
    delay_us: int  # first named -> SUCCEEDED
    chatty: bool
    phase_us: int  # offset of its first log line after it starts running
    first_us: int = 0  # 0: not named yet
    told_end_us: int = 0  # when an answer first said SUCCEEDED (0: none yet)

    @property
    def vertex_id(self) -> str:
        return str(VERTEX_ID_BASE + self.index)

    def seen(self, at_us: int) -> None:
        if not self.first_us:
            self.first_us = at_us

    @property
    def run_us(self) -> int:
        return self.first_us + self.delay_us // 4

    @property
    def end_us(self) -> int:
        return self.first_us + self.delay_us

    def state(self, at_us: int) -> str:
        """QUEUED, RUNNING or SUCCEEDED (ml v1's names) at ``at_us``, as an answer tells it."""
        if at_us >= self.end_us:
            self.told_end_us = self.told_end_us or at_us
            return "SUCCEEDED"
        return "RUNNING" if at_us >= self.run_us else "QUEUED"


class Fleet:
    """Every job of one scenario, by each name a request may use."""

    def __init__(self, project: str, jobs: list[Job]) -> None:
        self.project = project
        self.number = project_number(project)
        self.jobs = jobs
        self.by_id = {job.job_id: job for job in jobs}
        self.by_vertex_id = {job.vertex_id: job for job in jobs}
        self.by_log_id = {**self.by_id, **self.by_vertex_id}  # resource.labels.job_id of either backend
        self.by_quoted = {**self.by_id, **{sanitize_label_value(j.job_id): j for j in jobs}}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Fleet:
        jobs = [
            Job(str(j["job_id"]), i, int(j["delay"] * 1e6), bool(j["chatty"]), int(j["phase"] * 1e6))
            for i, j in enumerate(spec["jobs"])
        ]
        return cls(str(spec["project"]), jobs)

    def vertex_name(self, job: Job) -> str:
        return f"projects/{self.number}/locations/{REGION}/customJobs/{job.vertex_id}"

    # -- resources ---------------------------------------------------------------------------

    def ml_job(self, job: Job, at_us: int) -> dict[str, Any]:
        """An ml v1 ``Job``, as ``jobs.get`` and ``jobs.list`` answer it."""
        state = job.state(at_us)
        body: dict[str, Any] = {
            "jobId": job.job_id,
            "createTime": rfc3339_us(job.first_us),
            "state": state,
            "trainingInput": {
                "scaleTier": "BASIC",
                "packageUris": [f"gs://{self.project}-staging/trainer-1.0.tar.gz"],
                "pythonModule": "trainer.task",
                "region": REGION,
                "runtimeVersion": "2.11",
                "pythonVersion": "3.7",
            },
            "etag": base64.b64encode(f"{job.job_id}:{state}".encode()).decode(),
        }
        if state != "QUEUED":
            body["startTime"] = rfc3339_us(job.run_us)
        if state == "SUCCEEDED":
            body["endTime"] = rfc3339_us(job.end_us)
            body["trainingOutput"] = {"consumedMLUnits": 0.02}
        return body

    def vertex_job(self, job: Job, at_us: int) -> dict[str, Any]:
        """A Vertex AI ``CustomJob``, as ``customJobs.get`` and ``customJobs.list`` answer it."""
        state = job.state(at_us)
        body: dict[str, Any] = {
            "name": self.vertex_name(job),
            "displayName": job.job_id,
            "jobSpec": {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": "1",
                        "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                        "pythonPackageSpec": {
                            "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-0:latest",
                            "packageUris": [f"gs://{self.project}-staging/trainer-1.0.tar.gz"],
                            "pythonModule": "trainer.task",
                        },
                    }
                ],
                "baseOutputDirectory": {"outputUriPrefix": f"gs://{self.project}-out/{job.job_id}/"},
            },
            "state": f"JOB_STATE_{state}",
            "createTime": rfc3339_us(job.first_us),
            "updateTime": rfc3339_us(job.first_us),
            "labels": {JOB_ID_LABEL: sanitize_label_value(job.job_id)},
        }
        if state != "QUEUED":
            body["startTime"] = body["updateTime"] = rfc3339_us(job.run_us)
        if state == "SUCCEEDED":
            body["endTime"] = body["updateTime"] = rfc3339_us(job.end_us)
        return body

    # -- list methods ------------------------------------------------------------------------

    def list_ml(self, query: Mapping[str, str]) -> dict[str, Any]:
        """``projects.jobs.list``: ``{"jobs": [...], "nextPageToken"}``."""
        return self._list(query, ML_JOB_FILTER_FIELDS, (("jobId",),), "jobs", self.ml_job)

    def list_vertex(self, query: Mapping[str, str]) -> dict[str, Any]:
        """``customJobs.list``: ``{"customJobs": [...], "nextPageToken"}``."""
        by_name = (("displayName",), ("labels", JOB_ID_LABEL))
        answer = self._list(query, VERTEX_JOB_FILTER_FIELDS, by_name, "customJobs", self.vertex_job)
        mask = query.get("readMask")
        if mask and answer.get("customJobs"):  # as Google and the local service do
            from airflow_aip.local.vertex.render import apply_read_mask

            schema = "GoogleCloudAiplatformV1CustomJob"
            answer["customJobs"] = [apply_read_mask(job, mask, schema) for job in answer["customJobs"]]
        return answer

    def _list(
        self,
        query: Mapping[str, str],
        fields: FilterFields,
        id_fields: tuple[tuple[str, ...], ...],
        key: str,
        render: Any,
    ) -> dict[str, Any]:
        at = now_us()
        node = parse_filter(query.get("filter"), fields)
        size = min(int(query.get("pageSize") or MAX_PAGE_SIZE), MAX_PAGE_SIZE)
        if size <= 0:
            raise ValidationError("pageSize", "must be positive")
        offset = _offset(query.get("pageToken"))
        candidates = self._candidates(query.get("filter") or "", node, id_fields)
        for job in candidates:  # a job named by a list is a job its caller watches: its clock starts
            job.seen(at)
        resources = [render(job, at) for job in candidates]
        exact = node is not None and _ids_only(node, id_fields)  # the candidates are the matches
        matched = [r for r in resources if exact or node is None or node.matches(r)]
        matched.sort(key=lambda r: (r["createTime"], r.get("name") or r.get("jobId")), reverse=True)
        answer: dict[str, Any] = {key: matched[offset : offset + size]} if matched[offset:] else {}
        if offset + size < len(matched):
            answer["nextPageToken"] = base64.urlsafe_b64encode(str(offset + size).encode()).decode()
        return answer

    def _candidates(self, text: str, node: Node | None, id_fields: tuple[tuple[str, ...], ...]) -> list[Job]:
        """The jobs the filter can match: those its quoted values name, unless it negates something."""
        if node is None or not _positive(node, id_fields):
            return list(self.jobs)
        named = (self.by_quoted.get(value) for value in _QUOTED.findall(text))
        return list({job.index: job for job in named if job is not None}.values())


def _is_id_term(node: Node, id_fields: tuple[tuple[str, ...], ...]) -> bool:
    return (
        isinstance(node, Comparison) and node.op == "=" and node.path in id_fields and "*" not in node.value
    )


def _positive(node: Node, id_fields: tuple[tuple[str, ...], ...]) -> bool:
    """True when every job the filter matches has its ID quoted in it (an OR/AND of ``id=`` terms)."""
    if isinstance(node, Negation):
        return False
    if isinstance(node, Comparison):
        return _is_id_term(node, id_fields)
    parts = [_positive(part, id_fields) for part in node.parts]
    return all(parts) if node.op == "OR" else any(parts)


def _ids_only(node: Node, id_fields: tuple[tuple[str, ...], ...]) -> bool:
    """True for ``id="a" OR id="b" ...``: exactly the jobs it names match, no need to evaluate it."""
    if isinstance(node, Junction) and node.op == "OR":
        return all(_is_id_term(part, id_fields) for part in node.parts)
    return _is_id_term(node, id_fields)


def _offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        return int(base64.urlsafe_b64decode(token.encode()))
    except ValueError as err:
        raise ValidationError("pageToken", "is not a token this service issued") from err


def job_times(fleet: Fleet) -> dict[str, dict[str, float | None]]:
    """Each job's schedule in UNIX seconds (None: never named), for the harness."""
    return {
        job.job_id: {
            "first": job.first_us / 1e6 if job.first_us else None,
            "run": job.run_us / 1e6 if job.first_us else None,
            "end": job.end_us / 1e6 if job.first_us else None,
            "told_end": job.told_end_us / 1e6 if job.told_end_us else None,
        }
        for job in fleet.jobs
    }


def dumps(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()
