"""The trigger bench's fake Google APIs: one asyncio HTTP/1.1 server on 127.0.0.1, in its own process.

    python -m bench.trigger_api <spec.json>     # prints its port, then serves until terminated

It serves, for the jobs of the spec (:mod:`bench.trigger_api_jobs`, :mod:`bench.trigger_api_logs`):

- ml v1: ``GET v1/projects/{p}/jobs/{id}`` and ``GET v1/projects/{p}/jobs?filter=..&pageSize=..``;
- Vertex AI: ``GET v1/projects/{p}/locations/{r}/customJobs/{id}`` and ``.../customJobs?filter=..``
  (``hyperparameterTuningJobs`` lists answer empty, gets 404: there are none);
- Cloud Logging: ``POST v2/entries:list``.

It counts every request by method and time; ``GET /_counts`` hands the harness the counts,
the time spent answering each method (so a slow fake is not mistaken for a slow watcher), each
job's schedule with when an answer first said it ended, and the log lines each job wrote up to
its end (that request is not counted). ``POST /_throttle {"method": ..., "count": n}`` makes
the next ``n`` requests of a method answer 429 RESOURCE_EXHAUSTED, as Google does over quota.
Its CPU is not the watcher's: it runs apart, and the bench measures the watcher's process only.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from airflow_aip.exceptions import ValidationError
from bench.trigger_api_jobs import Fleet, dumps, job_times, now_us
from bench.trigger_api_logs import Logs, lines_written

Answer = tuple[int, Any]
_ML_JOB = re.compile(r"/v1/projects/([^/]+)/jobs/([^/:]+)")
_ML_LIST = re.compile(r"/v1/projects/([^/]+)/jobs")
_VERTEX_JOB = re.compile(
    r"/v1/projects/([^/]+)/locations/([^/]+)/(customJobs|hyperparameterTuningJobs)/([^/:]+)"
)
_VERTEX_LIST = re.compile(r"/v1/projects/([^/]+)/locations/([^/]+)/(customJobs|hyperparameterTuningJobs)")


def _error(status: int, message: str, reason: str) -> Answer:
    return status, {"error": {"code": status, "message": message, "status": reason}}


class Api:
    """Routing and bookkeeping; the answers are the fleet's and the logs'."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.logs = Logs(fleet)
        self.calls: dict[str, list[float]] = defaultdict(list)
        self.statuses: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.throttle: dict[str, int] = {}
        self.service: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])  # n, total s, max s

    def handle(self, method: str, target: str, body: bytes) -> Answer:
        parts = urlsplit(target)
        path, query = unquote(parts.path), dict(parse_qsl(parts.query))
        if path == "/_counts":
            return 200, self.counts()
        if path == "/_throttle" and method == "POST":
            ask = json.loads(body)
            self.throttle[str(ask["method"])] = int(ask["count"])
            return 200, {}
        name, route = self.route(method, path)
        self.calls[name].append(time.time())
        started = time.perf_counter()
        if self.throttle.get(name, 0) > 0:
            self.throttle[name] -= 1
            answer = _error(429, "Quota exceeded (bench throttle).", "RESOURCE_EXHAUSTED")
        else:
            try:
                answer = route(query, body)
            except ValidationError as err:
                answer = _error(400, str(err), "INVALID_ARGUMENT")
            except Exception as err:  # a bug of the bench: counted as a 500, and its traceback shown
                traceback.print_exc()
                answer = _error(500, f"{type(err).__name__}: {err}", "INTERNAL")
        self.statuses[name][answer[0]] += 1
        spent, service = time.perf_counter() - started, self.service[name]
        service[0] += 1
        service[1] += spent
        service[2] = max(service[2], spent)
        return answer

    def route(self, method: str, path: str) -> tuple[str, Any]:
        """The method's name (for the counts) and its answer, given the query and the body."""
        if method == "POST" and path == "/v2/entries:list":
            return "logging.entries.list", lambda _q, body: (200, self.logs.list_entries(json.loads(body)))
        if method != "GET":
            return "other", lambda _q, _b: _error(405, f"{method} {path}", "UNIMPLEMENTED")
        if match := _VERTEX_JOB.fullmatch(path):
            kind, job_id = match.group(3), match.group(4)
            return f"vertex.{kind}.get", lambda _q, _b: self.vertex_get(kind, job_id)
        if match := _VERTEX_LIST.fullmatch(path):
            kind = match.group(3)
            if kind != "customJobs":
                return f"vertex.{kind}.list", lambda _q, _b: (200, {})
            return "vertex.customJobs.list", lambda q, _b: (200, self.fleet.list_vertex(q))
        if match := _ML_JOB.fullmatch(path):
            job_id = match.group(2)
            return "ml.jobs.get", lambda _q, _b: self.ml_get(job_id)
        if _ML_LIST.fullmatch(path):
            return "ml.jobs.list", lambda q, _b: (200, self.fleet.list_ml(q))
        return "other", lambda _q, _b: _error(404, f"no route {path}", "NOT_FOUND")

    def ml_get(self, job_id: str) -> Answer:
        job = self.fleet.by_id.get(job_id)
        if job is None:
            return _error(404, "The specified job was not found.", "NOT_FOUND")
        at = now_us()
        job.seen(at)
        return 200, self.fleet.ml_job(job, at)

    def vertex_get(self, kind: str, vertex_id: str) -> Answer:
        job = self.fleet.by_vertex_id.get(vertex_id) if kind == "customJobs" else None
        if job is None:
            return _error(404, f"The {kind} resource {vertex_id} is not found.", "NOT_FOUND")
        at = now_us()
        job.seen(at)
        return 200, self.fleet.vertex_job(job, at)

    def counts(self) -> dict[str, Any]:
        times = job_times(self.fleet)
        for job in self.fleet.jobs:
            times[job.job_id]["log_lines"] = lines_written(job)
        return {
            "calls": self.calls,
            "statuses": {name: dict(by) for name, by in self.statuses.items()},
            "service": self.service,
            "jobs": times,
        }


async def _serve(api: Api) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, target, _ = head[0].split(" ", 2)
                length = 0
                for line in head[1:]:
                    key, _, value = line.partition(":")
                    if key.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                status, payload = api.handle(method, target, body)
                data = dumps(payload)
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(Api(Fleet.from_spec(json.loads(Path(sys.argv[1]).read_text())))))
