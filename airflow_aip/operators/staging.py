"""Stage trainer and dependency packages to Cloud Storage, content-addressed.

Each local file goes to ``{staging_uri}/{sha256}/{basename}``: the URI names the content, so a
re-run of an unchanged package uploads nothing, and two DAG runs staging at once meet at the same
object (created once, with a generation precondition). The result, in input order, is ready for
``trainingInput.packageUris``.

A ``BuildTrainerPackageOperator`` result built on another machine (a Celery worker, a
Kubernetes pod) is rebuilt here from its source and staged only if its sha256 is the build's
(``airflow_aip.staging_plan``): build and stage may run on workers that share no disk.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow.sdk import Context

from airflow_aip.hooks.storage import StorageHook
from airflow_aip.operators.connected import GoogleOperator
from airflow_aip.staging_plan import PlannedUpload, plan_staging


class StagePackagesOperator(GoogleOperator):
    """Upload ``packages`` (paths, gs:// URIs, or BuildTrainerPackageOperator results); return gs:// URIs.

    Every input is validated (URIs, bucket name, files, duplicate basenames, the 100-package API
    limit) before the first byte is uploaded.
    """

    template_fields: Sequence[str] = ("packages", "staging_uri", "gcp_conn_id", "impersonation_chain")
    gcp_conn_id: str  # Cloud Storage is reached through a connection (ADC when it is missing)
    ui_color = "#e8f0fe"

    def __init__(self, *, packages: Any, staging_uri: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.packages = packages
        self.staging_uri = staging_uri

    @cached_property
    def hook(self) -> StorageHook:
        return StorageHook(gcp_conn_id=self.gcp_conn_id, impersonation_chain=self.impersonation_chain)

    def execute(self, context: Context) -> list[str]:
        with tempfile.TemporaryDirectory(prefix="aip-stage-rebuild-") as rebuild_dir:
            plan = plan_staging(self.packages, self.staging_uri, Path(rebuild_dir))
            for entry in plan:
                if entry.rebuilt:
                    self.log.info(
                        "Built elsewhere, not on this machine: rebuilt %s from its source, same sha256 %s",
                        entry.local_path.name if entry.local_path else "",
                        entry.sha256,
                    )
            staged = self._stage(plan)
        self._lineage_result = staged
        return staged

    def _stage(self, plan: list[PlannedUpload]) -> list[str]:
        uploaded = skipped = sent = 0
        for entry in plan:
            if entry.local_path is None:
                continue  # already a gs:// URI: used as given
            staged = self.hook.stage_file(entry.local_path, entry.uri)
            uploaded += staged.uploaded
            skipped += not staged.uploaded
            sent += staged.bytes
        self.log.info(
            "Staged %d package(s) under %s: uploaded %d, skipped %d (already there), %d bytes uploaded",
            len(plan),
            self.staging_uri,
            uploaded,
            skipped,
            sent,
        )
        return [entry.uri for entry in plan]

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (the optional provider calls this): the sdists in, the staged packages out.

        The staged URIs are kept on ``self`` by ``execute`` (see
        :func:`airflow_aip.lineage.task_result`); each carries its sha256 in its path.
        """
        from airflow_aip.lineage import stage_lineage, task_result

        return stage_lineage(self.packages, task_result(self, task_instance))
