"""Export a trained model: the job's (or its best trial's) output, copied server-side.

The copy lands in ``{destination_uri}/{job_id}[_trial{N}]/`` with ``manifest.json`` written
last, so a reader that sees the manifest sees a complete model. With ``champion_manifest_uri``
the export happens only past the champion gate (:func:`airflow_aip.registry.gate.judge`, the
Model Registry store's rule too): no champion yet, or a better metric on the same metric tag and
goal (a tie keeps the champion). A champion or candidate without a metric, or one chosen on
another tag or goal, is refused: nothing is copied, the task succeeds and its ``reason`` says how
to promote by hand. The champion manifest is replaced with a generation precondition, so two
promoters never both win.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from airflow.sdk import Context

from airflow_aip.exceptions import ValidationError
from airflow_aip.export import (
    MANIFEST_NAME,
    ExportSource,
    describe_source,
    eval_data_from_file,
    export_source,
    measurement_from_file,
    metric_from_file,
    package_uris,
)
from airflow_aip.export_plan import export_destination, plan_export
from airflow_aip.hooks.storage import StorageHook
from airflow_aip.jobs import summarize_job
from airflow_aip.jobs.vertex.ladder import RUNG_LABEL
from airflow_aip.jobs.vertex.ladder_trials import with_ladder
from airflow_aip.operators.connected import JobOperator
from airflow_aip.registry.gate import Measurement
from airflow_aip.uris import GcsUri, parse_gcs_uri, validate_object_name


class ExportArtifactsOperator(JobOperator):
    """Copy a SUCCEEDED job's model to a versioned URI and write its manifest.

    :param job_id: our job ID (the submit task's XCom ``job_id``) or the job's resource name.
    :param source_subdir: folder below the job (or trial) output that holds the model
        (default: ``model`` on Vertex AI, where ``AIP_MODEL_DIR`` points; the job dir on ml v1).
    :param metrics_file: for jobs that are not tuned, a JSON file below the source whose
        ``metric_key`` is the model's metric (tuning jobs use the best trial's final metric).
    :param champion_manifest_uri: the current model's manifest; export (and replace it) only past
        the champion gate. The XCom then carries ``champion_metric`` and the gate's ``reason``.
        ``metrics_file``'s ``eval_data`` (the trainer's record of the data it scored) goes into
        the manifest, so a later gate knows what the metric was measured on.
    :param champion_evaluation: a gs:// metrics file in which an evaluation-only job scored the
        champion on this run's evaluation data (``evaluated_model_uri``, ``metric_key``,
        ``eval_data``). The gate compares with that score instead of the champion's recorded
        one; a missing file (no champion was evaluated) leaves the recorded one.
    :param require_same_eval_data: refuse (promote nothing, say why) when the two metrics were not
        measured on the same evaluation data. Default False: compare anyway, and the verdict says
        the data differed.
    :param earlier_jobs: resource names of tuning jobs whose trials count too (the submit
        summary's ``earlier_jobs``: a capacity ladder's earlier rungs, a resumed study's earlier
        job); the best trial is chosen over all of them, and exported from its own job's folder.
        A list, or its JSON (``"{{ ti.xcom_pull(task_ids='submit')['earlier_jobs'] | tojson }}"``).
    :param impersonation_chain: account (or chain) to impersonate for both APIs, as in the
        Google provider's operators.
    :param backend: "vertex" (default ``[aip] backend``) or "ai_platform".
    :param region: the job's location on Vertex AI (default ``[aip] region``).

    The connection's arguments: :class:`~airflow_aip.hooks.job_reference.JobConnection`.
    """

    template_fields: Sequence[str] = (
        "project_id",
        "region",
        "backend",
        "job_id",
        "destination_uri",
        "source_subdir",
        "metrics_file",
        "metric_key",
        "champion_manifest_uri",
        "champion_evaluation",
        "earlier_jobs",
        "gcp_conn_id",
        "api_endpoint",
        "impersonation_chain",
    )
    ui_color = "#e6f4ea"

    def __init__(
        self,
        *,
        job_id: str,
        destination_uri: str,
        source_subdir: str | None = None,
        metrics_file: str | None = None,
        metric_key: str = "metric",
        champion_manifest_uri: str | None = None,
        champion_evaluation: str | None = None,
        require_same_eval_data: bool = False,
        earlier_jobs: list[str] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id
        self.destination_uri = destination_uri
        self.source_subdir = source_subdir
        self.metrics_file = metrics_file
        self.metric_key = metric_key
        self.champion_manifest_uri = champion_manifest_uri
        self.champion_evaluation = champion_evaluation
        self.require_same_eval_data = require_same_eval_data
        self.earlier_jobs = earlier_jobs

    @cached_property
    def storage(self) -> StorageHook:
        return StorageHook(self.gcp_conn_id, impersonation_chain=self.impersonation_chain)

    def execute(self, context: Context) -> dict[str, Any]:
        destination_root, champion_uri = self._checked_locations()
        name = self.job_name_for(self.job_id)
        job = self.hook.read(name)
        source = self._with_metric(export_source(self._study_summary(job), self.source_subdir))
        self.log.info("%s", describe_source(source))
        destination = export_destination(source, destination_root)
        measurement = (
            read_measurement(self.storage, self.champion_evaluation, self.metric_key, self.log)
            if champion_uri
            else None
        )
        plan = plan_export(
            source,
            destination_root,
            champion_uri=champion_uri,
            champion=self.storage.read_manifest(champion_uri.uri) if champion_uri else None,
            measurement=measurement,
            require_same_eval_data=self.require_same_eval_data,
            listed=self.storage.list(source.prefix.uri.rstrip("/") + "/"),
            existing_manifest=self.storage.read_manifest(destination.join(MANIFEST_NAME).uri),
            packages=self.storage.metadata_of(package_uris(job)),
            run=_run_identity(context),
            exported_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        copied_bytes = self.storage.write_export(plan)
        for line in plan.report(copied_bytes):
            self.log.info("%s", line)
        result = {**plan.xcom(copied_bytes), **evaluation_record(self.champion_evaluation, measurement)}
        where = {"source_uri": source.prefix.uri, "job_output_dir": job.get("output_dir")}
        self._lineage_result = {**result, **where}  # for lineage: what the XCom does not say
        return result

    def _study_summary(self, job: dict[str, Any]) -> dict[str, Any]:
        """The job's summary; with ``earlier_jobs``, its best trial is chosen over theirs too."""
        names: Any = self.earlier_jobs
        if isinstance(names, str):  # a template renders a string: ``{{ ... | tojson }}``
            try:
                names = json.loads(names) if names.strip() else []
            except ValueError:
                names = None
        if names is not None and not isinstance(names, list | tuple):
            rule = f"must be a list of job resource names (or its JSON), got {self.earlier_jobs!r}"
            raise ValidationError("earlier_jobs", rule)
        earlier = []
        for name in names or []:
            if not isinstance(name, str) or not name.startswith("projects/"):
                raise ValidationError("earlier_jobs", f"must hold job resource names, got {name!r}")
            view = self.job_api.addressing(name).job_hook().read(name)
            earlier.append((str((view.get("labels") or {}).get(RUNG_LABEL) or "previous"), view))
        summary = summarize_job(job)
        label = str((job.get("labels") or {}).get(RUNG_LABEL) or "")
        return with_ladder(summary, [], earlier, label) if earlier else summary

    def _checked_locations(self) -> tuple[GcsUri, GcsUri | None]:
        """The destination and champion URIs, every path argument checked before the first request."""
        destination_root = parse_gcs_uri(self.destination_uri, "destination_uri")
        champion_uri = (
            parse_gcs_uri(self.champion_manifest_uri, "champion_manifest_uri", require_object=True)
            if self.champion_manifest_uri
            else None
        )
        for name in ("source_subdir", "metrics_file"):
            if getattr(self, name):
                validate_object_name(str(getattr(self, name)).strip("/"), name)
        return destination_root, champion_uri

    def _with_metric(self, source: ExportSource) -> ExportSource:
        """A job that is not tuned has its metric in ``metrics_file``, below the model it describes.

        The file also says which evaluation data the metric was measured on (a tuning job's best
        trial too, when its folder holds one).
        """
        if not self.metrics_file:
            return source
        uri = source.prefix.join(self.metrics_file, field="metrics_file").uri
        try:
            data = self.storage.read_bytes(uri)
        except FileNotFoundError:
            if source.metric is not None:
                return source
            raise ValidationError("metrics_file", f"{uri} does not exist") from None
        eval_data, eval_uri = eval_data_from_file(data)
        source = replace(source, eval_data=eval_data, eval_uri=eval_uri)
        if source.metric is not None:
            return source
        return replace(source, metric=metric_from_file(data, self.metric_key), metric_tag=self.metric_key)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (the optional provider calls this): the job's model in, its export out.

        ``execute`` keeps its result on ``self`` with the source prefix and the job's output
        directory, which the XCom does not carry (see :func:`airflow_aip.lineage.task_result`); a
        model that did not beat the champion was not exported: only the inputs are reported.
        """
        from airflow_aip.lineage import export_lineage, task_result

        return export_lineage(task_result(self, task_instance))


def _run_identity(context: Context) -> dict[str, Any]:
    ti = context["ti"]
    return {
        "dag_id": ti.dag_id,
        "task_id": ti.task_id,
        "run_id": ti.run_id,
        "try_number": ti.try_number,
    }


def evaluation_record(uri: str | None, measurement: Measurement | None) -> dict[str, Any]:
    """``champion_evaluation`` for the XCom: the metrics file the evaluation-only job wrote and
    what it says, so the pages show that job's metric (a single job reports none of its own)."""
    if measurement is None or not uri:
        return {}
    return {
        "champion_evaluation": {
            "uri": uri,
            "metric": measurement.metric,
            "metric_tag": measurement.metric_tag,
            "model_uri": measurement.model_uri,
        }
    }


def read_measurement(storage: StorageHook, uri: str | None, metric_key: str, log: Any) -> Measurement | None:
    """The champion scored on this run's data, from ``champion_evaluation``'s metrics file.

    None when no URI is given, or no file is there (no champion was evaluated: the gate then
    compares the champion's recorded metric, and says on which data).
    """
    if not uri:
        return None
    checked = parse_gcs_uri(uri, "champion_evaluation", require_object=True).uri
    try:
        data = storage.read_bytes(checked)
    except FileNotFoundError:
        log.info("No champion evaluation at %s: the champion's recorded metric is compared", checked)
        return None
    return measurement_from_file(data, metric_key, "champion_evaluation")
