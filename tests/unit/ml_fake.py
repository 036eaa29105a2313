"""A fake ml v1 API at the HTTP boundary, for branches no real server produces on demand.

It answers the four job methods like Google (status codes, error bodies, 409 on a taken ID,
400 when cancelling an ended job) and plays a script of states per job, one per GET. It plugs
in as an httpx MockTransport under the hooks' sync client and their async client pool, so the
sync and async paths see the same server.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

_JOB = re.compile(r"/v1/projects/(?P<project>[^/]+)/jobs/(?P<job>[^/:]+)(?P<cancel>:cancel)?$")
_JOBS = re.compile(r"/v1/projects/(?P<project>[^/]+)/jobs$")
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
_JOB_ID_TERM = re.compile(r'jobId="([^"]+)"')


class FakeMlApi:
    """Jobs by (project, id); ``script[job_id]`` is the states successive GETs reveal."""

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.script: dict[str, deque[str]] = {}
        self.errors: deque[tuple[int, str]] = deque()  # answered before anything else, in order
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, body)
        self.on_request: Callable[[str, str], None] | None = None

    # -- arranging ---------------------------------------------------------------------------

    def add_job(self, project: str, job_id: str, state: str, **fields: Any) -> dict[str, Any]:
        job = {"jobId": job_id, "state": state, "createTime": "2024-01-01T00:00:00Z", **fields}
        self.jobs[(project, job_id)] = job
        return job

    def play(self, job_id: str, states: Iterable[str]) -> None:
        self.script[job_id] = deque(states)

    def calls(self, method: str, suffix: str = "") -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] == method and r[1].endswith(suffix)]

    @property
    def cancels(self) -> list[str]:
        return [
            path.split("/")[-1].removesuffix(":cancel")
            for m, path, _ in self.requests
            if path.endswith(":cancel")
        ]

    # -- serving -----------------------------------------------------------------------------

    def handle(self, method: str, url: str, body: Any) -> tuple[int, Any]:
        parts = urlsplit(url)
        self.requests.append((method, parts.path, body))
        if self.on_request is not None:
            self.on_request(method, parts.path)
        if self.errors:
            status, message = self.errors.popleft()
            return status, {"error": {"code": status, "message": message}}
        if (match := _JOBS.search(parts.path)) and method == "POST":
            return self._create(match["project"], body)
        if match and method == "GET":
            return self._list(match["project"], parse_qs(parts.query))
        match = _JOB.search(parts.path)
        if match is None:
            return 404, {"error": {"code": 404, "message": f"no route {parts.path}"}}
        job = self.jobs.get((match["project"], match["job"]))
        if job is None:
            return 404, {
                "error": {"code": 404, "message": "Field: name Error: The specified job was not found."}
            }
        if match["cancel"]:
            return self._cancel(job)
        script = self.script.get(job["jobId"])
        if script:
            job["state"] = script.popleft()
        return 200, job

    def _create(self, project: str, body: dict[str, Any]) -> tuple[int, Any]:
        key = (project, body["jobId"])
        if key in self.jobs:
            return 409, {
                "error": {
                    "code": 409,
                    "message": "Field: job.job_id Error: A job with this id already exists.",
                }
            }
        self.jobs[key] = {**body, "state": "QUEUED", "createTime": "2024-01-01T00:00:00Z"}
        return 200, self.jobs[key]

    def _cancel(self, job: dict[str, Any]) -> tuple[int, Any]:
        if job["state"] in TERMINAL:
            return 400, {
                "error": {"code": 400, "message": f"Job is already in terminal state {job['state']}"}
            }
        job["state"] = "CANCELLING"
        self.script[job["jobId"]] = deque(["CANCELLED"])
        return 200, {}

    def _list(self, project: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        """Jobs in ID order; a ``jobId="a" OR ...`` filter narrows them, and each job listed
        plays its script's next state, as a GET does (the triggerer's poller reads by list)."""
        jobs = sorted((j for (p, _), j in self.jobs.items() if p == project), key=lambda j: j["jobId"])
        wanted = set(_JOB_ID_TERM.findall(query.get("filter", [""])[0]))
        if wanted:
            jobs = [job for job in jobs if job["jobId"] in wanted]
            for job in jobs:
                if script := self.script.get(job["jobId"]):
                    job["state"] = script.popleft()
        size = int(query.get("pageSize", ["100"])[0])
        start = int(query.get("pageToken", ["0"])[0])
        page: dict[str, Any] = {"jobs": jobs[start : start + size]}
        if start + size < len(jobs):
            page["nextPageToken"] = str(start + size)
        return 200, page

    # -- transports --------------------------------------------------------------------------

    def httpx_transport(self) -> httpx.MockTransport:
        return mock_transport(self)


class _Handles(Protocol):
    def handle(self, method: str, url: str, body: Any) -> tuple[int, Any]: ...


def mock_transport(api: _Handles) -> httpx.MockTransport:
    """An httpx transport answered by ``api.handle`` (a fake API at the HTTP boundary)."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        status, payload = api.handle(request.method, str(request.url), body)
        return httpx.Response(status, json=payload)

    return httpx.MockTransport(handler)


def sync_client(api: _Handles) -> httpx.Client:
    """The sync hooks' client, served by ``api``."""
    return httpx.Client(transport=mock_transport(api))


H = TypeVar("H", bound=_Handles)


def serve_hook(monkeypatch: pytest.MonkeyPatch, hook: type, api: H) -> H:
    """Every ``hook`` instance's sync client is served by ``api`` (for the test); ``api``."""
    client = sync_client(api)
    monkeypatch.setattr(hook, "_sync_client", lambda self: client)
    return api


class Scripted:
    """Answers requests in order from a script of ``(status, payload)``; records each URL sent."""

    def __init__(self, answers: Iterable[tuple[int, Any]]) -> None:
        self.answers = deque(answers)
        self.request_sequence: list[tuple[str, str]] = []

    def handle(self, method: str, url: str, body: Any) -> tuple[int, Any]:
        self.request_sequence.append((url, method))
        return self.answers.popleft()
