"""Vertex AI custom training (aiplatform v1): the only place that talks to it.

Its regional endpoint and parent are Vertex AI's
(:class:`~airflow_aip.hooks.aiplatform.RegionalAiplatformHook`: there is no global endpoint for
training); credentials, signing and typed errors the shared core's. Answers leave here as the
neutral job view (:mod:`airflow_aip.jobs.vertex.view`).

Exactly once without a client ID. ``customJobs.create`` takes neither a job ID nor a request
ID, so a re-sent create makes a second job. A create is therefore sent once per decision:

- before it, the submit path looks the ID up (:meth:`find_job`: a list filtered on the
  ``aip_job_id`` label, then the exact ``displayName``);
- when its answer is lost (5xx, 429, dropped connection, timeout), the job may exist. The
  list is asked again over :attr:`settle_delays` (Google does not promise that a list sees a
  job the moment it is created), and if the job shows up the create raises
  JobAlreadyExistsError with ``first_sent``, exactly as ml v1's 409 on a re-send does, so the
  model's adoption rule decides whose it is. Only when it stays absent is the create sent again.

google.*, googleapiclient and httpx are imported inside functions (DAG files import this module).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

from airflow_aip.exceptions import ApiError, CapacityRefusedError, JobAlreadyExistsError, JobNotFoundError
from airflow_aip.hooks.aiplatform import RegionalAiplatformHook
from airflow_aip.hooks.http_shared import is_transient, settled_lookup
from airflow_aip.hooks.job_client import acancel_unless_ended, alist_watched, cancel_unless_ended
from airflow_aip.jobs.backend import Backend
from airflow_aip.jobs.experiments import EXPERIMENT_RUN_SCHEMA, runs_by_job
from airflow_aip.jobs.labels import JOB_ID_LABEL, sanitize_label_value
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.vertex.backend import VERTEX_AI
from airflow_aip.jobs.vertex.capacity import quota_refusal
from airflow_aip.jobs.vertex.view import CUSTOM_KIND, TUNING_KIND, WATCHED_FIELDS, job_state, parse_name
from airflow_aip.jobs.view import JobView, last_segment
from airflow_aip.jobs.watch import Listed, WatchBatch, batches

CREATE_SENDS = 3  # a create whose answer is lost, and whose job never shows up, is sent again
LIST_PAGE_SIZE = 100


class VertexJobHook(RegionalAiplatformHook):
    """Create, find, read and cancel Vertex AI CustomJobs and HyperparameterTuningJobs, sync and async.

    Arguments are :class:`~airflow_aip.hooks.aiplatform.RegionalAiplatformHook`'s (``region``:
    the endpoint and the jobs' parent).
    """

    hook_name = "Vertex AI training (airflow_aip)"
    backend: ClassVar[Backend] = VERTEX_AI

    def _view(self, resource: dict[str, Any]) -> JobView:
        view = self.backend.view(resource, project_id=self.project_id, region=self.region)
        view["console_url"] = self.local_page(view["name"])  # None: Google's console, from the view
        return view

    # -- raw methods ---------------------------------------------------------------------------

    def list_jobs(
        self, kind: str, *, filter: str | None = None, page_size: int = LIST_PAGE_SIZE
    ) -> list[dict[str, Any]]:
        """Every job of ``kind`` in the project and region matching ``filter`` (all pages)."""
        params: dict[str, Any] = {"pageSize": page_size, **({"filter": filter} if filter else {})}
        return self.list_all(f"{kind}.list", f"v1/{self.parent()}/{kind}", kind, params)

    def get_job(self, name: str) -> dict[str, Any]:
        """The resource; JobNotFoundError when there is none."""
        return self.request(f"{parse_name(name)[2]}.get", "GET", f"v1/{name}")

    # -- the neutral interface (the same on TrainingJobHook) -----------------------------------

    def find_job(self, job_id: str, kind: str | None = None) -> JobView | None:
        """The job our ID names (displayName and label), or None; the oldest if a race made two."""
        found: list[dict[str, Any]] = []
        label = sanitize_label_value(job_id)
        for each in (kind,) if kind else (TUNING_KIND, CUSTOM_KIND):
            listed = self.list_jobs(each, filter=f'labels.{JOB_ID_LABEL}="{label}"')
            found += [job for job in listed if job.get("displayName") == job_id]
        if not found:
            return None
        oldest = min(found, key=lambda job: (str(job.get("createTime") or ""), str(job.get("name"))))
        return self._view(self.get_job(str(oldest["name"])))  # list leaves trials out

    def create(self, request: JobRequest, job_id: str) -> JobView:
        """Create the job under ``job_id``; a lost answer is settled by lookups (module docstring)."""
        body = request.for_attempt(job_id)
        path = f"v1/{self.parent()}/{request.kind}"
        self.log.info("Creating Vertex AI %s %s in %s", request.kind, job_id, self.parent())
        first_sent = time.time()
        for send in range(1, CREATE_SENDS + 1):
            try:
                return self._view(
                    self.request(f"{request.kind}.create", "POST", path, body=body, retry=False)
                )
            except Exception as err:
                metrics = quota_refusal(err.status, err.message) if isinstance(err, ApiError) else None
                if metrics and isinstance(err, ApiError):  # a resource quota: retrying soon meets it again
                    raise CapacityRefusedError(
                        err.status, err.message, method=f"{request.kind}.create", metrics=metrics
                    ) from err
                if not is_transient(err):
                    raise
                self.log.warning("Create of %s got no answer (%s): looking for the job", job_id, err)
                if self._settled_lookup(job_id, request.kind) is not None:
                    raise JobAlreadyExistsError(
                        409, f"{job_id} exists", method=f"{request.kind}.create", first_sent=first_sent
                    ) from None
                if send == CREATE_SENDS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _settled_lookup(self, job_id: str, kind: str) -> JobView | None:
        return settled_lookup(lambda: self.find_job(job_id, kind), self.settle_delays)

    # -- watching many jobs (the triggerer's shared poller) ------------------------------------

    def watch_batches(self, watched: Sequence[tuple[str, str]]) -> list[WatchBatch]:
        """List calls that read the watched ``(name, job_id)`` jobs: our label, per parent and kind.

        A job named by a resource name we did not create carries no label: its list finds
        nothing, and the poller reads it with a get.
        """
        groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for name, job_id in watched:
            project, location, kind, _ = parse_name(name)
            groups.setdefault((f"projects/{project}/locations/{location}", kind), []).append((name, job_id))
        return [
            WatchBatch(tuple(name for name, _ in members), parent, kind, text)
            for (parent, kind), jobs in groups.items()
            for members, text in batches(
                jobs, lambda job: sanitize_label_value(job[1]), f"labels.{JOB_ID_LABEL}"
            )
        ]

    async def alist_batch(self, batch: WatchBatch) -> Mapping[str, Listed]:
        """The batch's jobs the list answered, by watched name (an answer as last round's is not
        parsed again: :func:`~airflow_aip.hooks.job_client.alist_watched`)."""
        path = f"v1/{batch.parent}/{batch.kind}"
        return await alist_watched(
            self,
            batch,
            f"{batch.kind}.list",
            path,
            batch.kind,
            partial(self._listed, batch),
            read_mask=WATCHED_FIELDS.get(batch.kind),
        )

    def _listed(self, batch: WatchBatch, listed: list[dict[str, Any]]) -> dict[str, Listed]:
        """Matched by kind and numeric ID (Google answers the project's number where a name may
        say its ID). Lists leave a tuning job's trials out, so such a job is not ``complete``."""
        wanted = {last_segment(name): name for name in batch.names}
        found: dict[str, Listed] = {}
        for resource in listed:
            name = wanted.get(last_segment(str(resource.get("name", ""))))
            if name is not None:
                state = job_state(resource.get("state"))
                found[name] = Listed(state, partial(self._view, resource), batch.kind != TUNING_KIND)
        return found

    def read(self, name: str) -> JobView:
        return self._view(self.get_job(name))

    async def aread(self, name: str) -> JobView:
        """As :meth:`read`, without blocking the event loop."""
        resource = await self.arequest(f"{parse_name(name)[2]}.get", "GET", f"v1/{name}")
        return self._view(resource)

    def cancel(self, name: str) -> bool:
        """Ask for cancellation; False when the job had already ended (Vertex answers 400)."""
        return cancel_unless_ended(
            partial(self.request, f"{parse_name(name)[2]}.cancel", "POST", f"v1/{name}:cancel", body={}),
            lambda: self.read(name)["state"],
            self.log,
            name,
        )

    async def acancel(self, name: str) -> bool:
        """As :meth:`cancel`, async."""

        async def state_now() -> Any:
            return (await self.aread(name))["state"]

        return await acancel_unless_ended(
            partial(self.arequest, f"{parse_name(name)[2]}.cancel", "POST", f"v1/{name}:cancel", body={}),
            state_now,
            self.log,
            name,
        )

    def logged_runs(self, job_ids: Sequence[str], since: str | None) -> dict[str, dict[str, Any]]:
        """The Vertex AI Experiments run each job's trainer logged to (:mod:`airflow_aip.jobs.experiments`),
        among the runs created since ``since`` (the job's createTime); none when the project's
        metadata store does not exist (Experiments never used)."""
        if not job_ids:
            return {}
        condition = f'schema_title="{EXPERIMENT_RUN_SCHEMA}"'
        if since:
            condition += f' AND create_time>="{since}"'
        params: dict[str, Any] = {"pageSize": LIST_PAGE_SIZE, "filter": condition}
        path = f"v1/{self.parent()}/metadataStores/default/contexts"
        try:
            contexts = self.list_all("metadataStores.contexts.list", path, "contexts", params)
        except JobNotFoundError:
            return {}
        return runs_by_job(contexts, job_ids)

    def resolve(self, job_id: str) -> str:
        """The resource name of our job ID (JobNotFoundError when no job carries it)."""
        found = self.find_job(job_id)
        if found is None:
            raise JobNotFoundError(404, f"No Vertex AI training job named {job_id} in {self.parent()}")
        return str(found["name"])
