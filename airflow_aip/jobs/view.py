"""The backend-neutral job view: what the hooks hand up, whatever API answered.

Wire formats stop at the hooks. ml v1 answers a ``Job`` with ``jobId``, ``trainingInput`` and
``trainingOutput``; Vertex AI a ``CustomJob`` or ``HyperparameterTuningJob`` with a numeric
``name``, ``JOB_STATE_*`` and ``trials[].finalMeasurement``. Each backend's module turns its
answer into this one mapping (:func:`.mlv1.view.view_from_ml`, :func:`.vertex.view.view_from_vertex`),
so the wait step, the adoption rule, the summary in XCom, export, links and the UI read one
shape. It is a plain JSON-serialisable dict, because it crosses a trigger's event.

Keys:

- ``backend``: ``vertex`` or ``ai_platform``;
- ``job_id``: our ID (ml v1's ``jobId``; on Vertex the ``displayName``, also a label);
- ``name``: the resource name that addresses the job on its API (``projects/p/jobs/ID`` or
  ``projects/123/locations/us-central1/customJobs/456``); ``log_id``: the ID its Cloud Logging
  entries carry (``resource.labels.job_id``): the last segment of ``name``;
- ``project_id``, ``region``, ``state`` (a :class:`.states.JobState` value), ``error_message``,
  ``error_code`` (Vertex AI's google.rpc.Code, None on ml v1),
  ``create_time``, ``start_time``, ``end_time``, ``labels``;
- ``output_dir``: ml v1's ``jobDir``, Vertex's ``baseOutputDirectory``;
- ``image_uri``: the image the chief runs: a custom container's (``containerSpec.imageUri``,
  ml v1's ``masterConfig.imageUri``), else on Vertex the pre-built ``executorImageUri``; None when
  the job names none (an ml v1 runtime version);
- ``is_hyperparameter_tuning_job``, ``hyperparameter_metric_tag``, ``goal``, ``parameters``
  (name, type and scale of each tuned hyperparameter), ``trials``: in AI Platform's vocabulary
  (``trialId``, ``state``, ``hyperparameters``, ``finalMetric{trainingStep, objectiveValue}``),
  which our users' DAGs already read;
- ``usage``: what the job bills for (its pools' machines, accelerators, disks and replicas, its
  scheduling strategy and timeout: :mod:`.vertex.usage`), None where the backend has no prices
  (ml v1); the cost estimate (:mod:`.cost`) reads it;
- ``spec``: the job as its API holds it, for the adoption rule's comparison only (never in XCom).
"""

from __future__ import annotations

from typing import Any

AI_PLATFORM = "ai_platform"
VERTEX = "vertex"
BACKENDS = (VERTEX, AI_PLATFORM)

JobView = dict[str, Any]


def check_backend(value: object) -> str:
    """``backend`` is one we serve; else a ValidationError naming the field."""
    from airflow_aip.exceptions import ValidationError

    if value not in BACKENDS:
        raise ValidationError("backend", f"must be one of {', '.join(BACKENDS)}, got {value!r}")
    return str(value)


def last_segment(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1]
