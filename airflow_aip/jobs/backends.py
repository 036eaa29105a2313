"""The backends by name: the one module of the neutral model that knows both wire folders.

A task, a view, a trigger or a manifest carries a backend's :attr:`~airflow_aip.jobs.backend.Backend.name`;
this finds the object. Everything else above the wire folders holds a ``Backend`` and reads
its attributes, so a new wire format is a new folder plus a line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.backend import Backend
from airflow_aip.jobs.mlv1.backend import MLV1
from airflow_aip.jobs.request import JobRequest, RequestInputs
from airflow_aip.jobs.vertex.backend import VERTEX_AI
from airflow_aip.jobs.vertex.ladder import VERTEX_ONLY, Rung, ladder_requests
from airflow_aip.jobs.vertex.placement import parse_placement
from airflow_aip.jobs.view import AI_PLATFORM, check_backend

BACKENDS: Mapping[str, Backend] = {each.name: each for each in (VERTEX_AI, MLV1)}


def backend_named(name: object) -> Backend:
    """The backend called ``name``; ValidationError naming ``backend`` for any other value."""
    return BACKENDS[check_backend(name)]


def backend_of(view: Mapping[str, Any]) -> Backend:
    """The backend a job view (or summary, or manifest) names; ml v1 for old ones that name none."""
    return backend_named(view.get("backend") or AI_PLATFORM)


def build_request(
    backend: str | Backend,
    *,
    layered_input: Mapping[str, Any],
    named: Mapping[str, Any],
    labels: dict[str, str],
    first_id: str,
    default_region: str | None = None,
    executor_image_uri: str | None = None,
    framework: str | None = None,
    vertex_job: Mapping[str, Any] | None = None,
    placement: Mapping[str, Any] | None = None,
) -> JobRequest:
    """The request for ``backend``, every field checked (nothing is sent before this returns).

    On Vertex AI, AI Platform's vocabulary is translated and ``vertex_job`` goes on top; on ml v1
    ``vertex_job`` is an error (see :class:`~airflow_aip.jobs.request.RequestInputs`).
    ``placement``: a job's placement in the translator's names (:func:`build_requests` parses the
    operator's).
    """
    chosen = backend if not isinstance(backend, str) else backend_named(backend)
    asked = RequestInputs(
        layered_input,
        named,
        labels,
        first_id,
        default_region,
        executor_image_uri,
        framework,
        vertex_job,
        placement,
    )
    return chosen.build_request(asked)


@dataclass(frozen=True)
class Requests:
    """What a submit sends, every request validated: the job's, or each rung's of a capacity ladder.

    ``rungs`` is empty for one job; ``requests`` holds each rung's request (the job's alone without
    a ladder), in order.
    """

    rungs: tuple[Rung, ...]
    requests: tuple[JobRequest, ...]


def build_requests(backend: str | Backend, *, placement: object = None, **inputs: Any) -> Requests:
    """:func:`build_request` with the operator's ``placement``: a job's own, or a ladder's rungs.

    ``placement`` is parsed first (:func:`~airflow_aip.jobs.vertex.placement.parse_placement`) and
    refused on a backend that schedules no capacity; a ladder's every rung is built and checked
    before this returns.
    """
    chosen = backend if not isinstance(backend, str) else backend_named(backend)
    placed = parse_placement(placement)
    if placed.given and not chosen.schedules_capacity:
        raise ValidationError(placed.field, VERTEX_ONLY)
    request = build_request(chosen, placement=placed.job, **inputs)
    if not placed.rungs:
        return Requests((), (request,))
    return Requests(placed.rungs, ladder_requests(request, placed.rungs))
