"""Build the trainer sdist inside a DAG (``gcloud --package-path`` semantics, reproducible bytes).

The result goes to XCom as a dict: ``StagePackagesOperator(packages=[build.output])`` stages it
and verifies it was not changed in between (by its sha256). Nothing in it depends on this
machine's disk: when the stage task runs on another worker, where ``path`` does not exist, it
rebuilds the same bytes from ``source`` (same path on every worker: deployed with the DAGs).

With ``staging_uri`` the package is also staged here, in the same task, and its ``uri`` is in
the result: for workers that do not all hold the trainer's source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from airflow_aip.hooks.storage import StorageHook
from airflow_aip.operators.connected import GoogleOperator
from airflow_aip.packaging import build_sdist
from airflow_aip.staging_plan import plan_staging
from airflow_aip.uris import parse_gcs_uri


class BuildTrainerPackageOperator(GoogleOperator):
    """Build ``package_path``'s sdist; return ``{path, sha256, name, version, size, source, ...}``.

    :param staging_uri: also stage it (content-addressed, as ``StagePackagesOperator`` does) and
        add its gs:// ``uri`` to the result.
    """

    template_fields: Sequence[str] = (
        "package_path",
        "output_dir",
        "staging_uri",
        "gcp_conn_id",
        "impersonation_chain",
    )
    ui_color = "#e8f0fe"
    gcp_conn_id: str  # Cloud Storage is reached through a connection (ADC when it is missing)

    def __init__(
        self,
        *,
        package_path: str,
        output_dir: str | None = None,
        staging_uri: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.package_path = package_path
        self.output_dir = output_dir
        self.staging_uri = staging_uri

    def execute(self, context: Context) -> dict[str, Any]:
        if self.staging_uri is not None:
            parse_gcs_uri(self.staging_uri, "staging_uri")  # before building: bad input costs nothing
        built = build_sdist(self.package_path, self.output_dir)
        self.log.info(
            "Built %s %s: %s (%d bytes, sha256 %s)",
            built.name,
            built.version,
            built.path,
            built.size,
            built.sha256,
        )
        result = built.to_dict()
        if self.staging_uri is not None:
            result["uri"] = self._stage(result, self.staging_uri)
        self._lineage_result = result
        return result

    def _stage(self, built: dict[str, Any], staging_uri: str) -> str:
        (entry,) = plan_staging([built], staging_uri)
        assert entry.local_path is not None  # a file just built here
        hook = StorageHook(gcp_conn_id=self.gcp_conn_id, impersonation_chain=self.impersonation_chain)
        staged = hook.stage_file(entry.local_path, entry.uri)
        self.log.info("Staged %s (%s)", entry.uri, "uploaded" if staged.uploaded else "already there")
        return entry.uri

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (the optional provider calls this): the sdist out, with its sha256.

        The result is kept on ``self`` by ``execute``: the provider calls this on the same
        instance right after it (see :func:`airflow_aip.lineage.task_result`).
        """
        from airflow_aip.lineage import build_lineage, task_result

        return build_lineage(task_result(self, task_instance))
