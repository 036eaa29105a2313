"""Export a trained model: the job's (or its best trial's) output, copied server-side.

The copy lands in ``{destination_uri}/{job_id}[_trial{N}]/`` with ``manifest.json`` written
last, so a reader that sees the manifest sees a complete model. With ``champion_manifest_uri``
the export happens only when the new metric beats the current model's, and the champion
manifest is then replaced with a generation precondition, so two promoters never both win.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from airflow.sdk import BaseOperator, Context, conf

from airflow_aip.exceptions import AipError, ValidationError
from airflow_aip.export import (
    MANIFEST_NAME,
    ExportSource,
    beats,
    build_manifest,
    champion_metric,
    describe_source,
    export_source,
    metric_from_file,
    package_uris,
    relative_names,
    same_export,
)
from airflow_aip.hooks.base import DEFAULT_CONN_ID, DEFAULT_REGION
from airflow_aip.hooks.job_reference import JobHooksMixin
from airflow_aip.hooks.storage import StorageHook
from airflow_aip.jobs import summarize_job
from airflow_aip.uris import GcsUri, parse_gcs_uri, validate_object_name


class ExportArtifactsOperator(JobHooksMixin, BaseOperator):
    """Copy a SUCCEEDED job's model to a versioned URI and write its manifest.

    :param job_id: our job ID (the submit task's XCom ``job_id``) or the job's resource name.
    :param source_subdir: folder below the job (or trial) output that holds the model
        (default: ``model`` on Vertex AI, where ``AIP_MODEL_DIR`` points; the job dir on ml v1).
    :param metrics_file: for jobs that are not tuned, a JSON file below the source whose
        ``metric_key`` is the model's metric (tuning jobs use the best trial's final metric).
    :param champion_manifest_uri: the current model's manifest; export only if we beat it.
    :param impersonation_chain: account (or chain) to impersonate for both APIs, as in the
        Google provider's operators.
    :param backend: "vertex" (default ``[aip] backend``) or "ai_platform".
    :param region: the job's location on Vertex AI (default ``[aip] region``).
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
        project_id: str | None = None,
        source_subdir: str | None = None,
        metrics_file: str | None = None,
        metric_key: str = "metric",
        champion_manifest_uri: str | None = None,
        gcp_conn_id: str = DEFAULT_CONN_ID,
        api_endpoint: str | None = None,
        impersonation_chain: str | list[str] | None = None,
        backend: str = conf.get("aip", "backend", fallback="vertex"),
        region: str | None = conf.get("aip", "region", fallback=DEFAULT_REGION),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.backend = backend
        self.region = region
        self.job_id = job_id
        self.destination_uri = destination_uri
        self.project_id = project_id
        self.source_subdir = source_subdir
        self.metrics_file = metrics_file
        self.metric_key = metric_key
        self.champion_manifest_uri = champion_manifest_uri
        self.gcp_conn_id = gcp_conn_id
        self.api_endpoint = api_endpoint
        self.impersonation_chain = impersonation_chain

    @cached_property
    def storage(self) -> StorageHook:
        return StorageHook(self.gcp_conn_id, impersonation_chain=self.impersonation_chain)

    def execute(self, context: Context) -> dict[str, Any]:
        destination_root = parse_gcs_uri(self.destination_uri, "destination_uri")
        champion_uri = (
            parse_gcs_uri(self.champion_manifest_uri, "champion_manifest_uri", require_object=True)
            if self.champion_manifest_uri
            else None
        )
        for name in ("source_subdir", "metrics_file"):  # checked before the first request, too
            if getattr(self, name):
                validate_object_name(str(getattr(self, name)).strip("/"), name)
        name = self.job_name_for(self.job_id)  # first: a Vertex AI name sets the region of the hook
        job = self.hook.read(name)
        source = self._with_metric(export_source(summarize_job(job), self.source_subdir))
        result: dict[str, Any] = {
            "job_id": source.job_id,
            "name": source.resource_name,
            "trial_id": source.trial_id,
            "metric": source.metric,
            "metric_tag": source.metric_tag,
        }
        self.log.info("%s", describe_source(source))
        champion_generation, champion_value = self._champion(champion_uri)
        if champion_uri:
            result["champion_metric"] = champion_value
        if champion_uri and not beats(source.metric, champion_value, source.goal):
            self.log.info(
                "Not exported: %s %s does not beat the champion's %s (goal %s)",
                source.metric_tag or "metric",
                source.metric,
                champion_value,
                source.goal,
            )
            return {**result, "promoted": False, "exported": False, "destination": None}

        destination = destination_root.join(source.version, field="destination_uri")
        manifest, copied = self._copy_and_describe(source, destination, job, context)
        manifest_uri = destination.join(MANIFEST_NAME).uri
        result.update(
            destination=destination.uri,
            manifest_uri=manifest_uri,
            objects=len(manifest["objects"]),
            bytes=sum(o["size"] for o in manifest["objects"]),
            copied_bytes=copied,
            exported=True,
        )
        if champion_uri:
            self.storage.write_bytes(
                champion_uri.uri,
                _json(manifest),
                if_generation_match=champion_generation,
                content_type="application/json",
            )
            self.log.info(
                "Promoted %s: %s %s beats the champion's %s (goal %s); %s is the new champion",
                destination.uri,
                source.metric_tag or "metric",
                source.metric,
                champion_value,
                source.goal,
                champion_uri.uri,
            )
            result["promoted"] = True
        else:
            self.log.info("No champion_manifest_uri: exported without a promotion gate")
            result["promoted"] = None
        return result

    def _with_metric(self, source: ExportSource) -> ExportSource:
        if source.metric is not None or not self.metrics_file:
            return source
        uri = source.prefix.join(self.metrics_file, field="metrics_file").uri
        try:
            data = self.storage.read_bytes(uri)
        except FileNotFoundError:
            raise ValidationError("metrics_file", f"{uri} does not exist") from None
        metric = metric_from_file(data, self.metric_key)
        return ExportSource(**{**source.__dict__, "metric": metric, "metric_tag": self.metric_key})

    def _champion(self, uri: GcsUri | None) -> tuple[int, float | None]:
        """(generation to replace, metric) of the current champion; (0, None) when there is none."""
        if uri is None:
            return 0, None
        info = self.storage.get_metadata(uri.uri)
        if info is None:
            return 0, None
        return info.generation, champion_metric(json.loads(self.storage.read_bytes(uri.uri)))

    def _copy_and_describe(
        self, source: ExportSource, destination: GcsUri, job: dict[str, Any], context: Context
    ) -> tuple[dict[str, Any], int]:
        """Copy what differs, then write the manifest (unless an identical export is there)."""
        listed = {info.uri: info for info in self.storage.list(source.prefix.uri.rstrip("/") + "/")}
        names = relative_names(source.prefix, list(listed))
        if not names:
            raise AipError(f"Nothing to export: no object below {source.prefix.uri}")
        objects, copied = [], 0
        for name in names:
            src = listed[source.prefix.join(name).uri]
            dst_uri = destination.join(name).uri
            existing = self.storage.get_metadata(dst_uri)
            if existing is None or (existing.size, existing.crc32c) != (src.size, src.crc32c):
                # Conditional (create, or replace what we just saw): retried when an answer is lost.
                generation = existing.generation if existing else 0
                self.storage.copy(src.uri, dst_uri, if_generation_match=generation)
                copied += src.size
            objects.append({"name": name, "size": src.size, "crc32c": src.crc32c, "md5_hash": src.md5_hash})
        manifest = build_manifest(
            source,
            destination,
            objects,
            self._packages(job),
            _run_identity(context),
            datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        manifest_uri = destination.join(MANIFEST_NAME).uri
        previous = self.storage.get_metadata(manifest_uri)
        if previous and same_export(json.loads(self.storage.read_bytes(manifest_uri)), manifest):
            self.log.info("%s already holds this export: nothing rewritten", destination.uri)
        else:
            self.storage.write_bytes(
                manifest_uri,
                _json(manifest),
                if_generation_match=previous.generation if previous else 0,
                content_type="application/json",
            )
        self.log.info("Exported %d objects (%d bytes copied) to %s", len(objects), copied, destination.uri)
        return manifest, copied

    def _packages(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for uri in package_uris(job):
            info = self.storage.get_metadata(uri) if str(uri).startswith("gs://") else None
            out.append(
                {
                    "uri": uri,
                    "crc32c": info.crc32c if info else None,
                    "md5_hash": info.md5_hash if info else None,
                }
            )
        return out


def _run_identity(context: Context) -> dict[str, Any]:
    ti = context["ti"]
    return {
        "dag_id": ti.dag_id,
        "task_id": ti.task_id,
        "run_id": ti.run_id,
        "try_number": ti.try_number,
    }


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data, indent=2, sort_keys=True).encode()
