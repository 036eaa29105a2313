"""Register an exported model as a Model Registry version; promote it past the champion gate, or roll back.

:class:`RegisterModelOperator` uploads the model an :class:`~.export.ExportArtifactsOperator`
exported (its manifest says what, from which job, trial and package, with which metric) as a
new version of ``model``, exactly once (:mod:`airflow_aip.registry.upload`), waits for the
upload's operation as a training job is waited for (the one wait step: in the worker, or
deferred through the triggerer's shared poller), and with
``champion_alias`` moves that alias to it only if it beats the champion
(:mod:`.promotion`). :class:`RollbackChampionOperator` moves the alias back to the previous
champion the ledger recorded.

With ``champion_asset``, a promotion or rollback emits an Asset event for it whose ``extra``
carries the model version, alias, metric and job: Dags scheduled on that Asset run only when the
champion changed (the task's outlet is an AssetAlias that gets the event only then).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from airflow.sdk import Asset, Context

from airflow_aip import config
from airflow_aip.exceptions import AipError, ValidationError
from airflow_aip.hooks.job_reference import API_FIELDS
from airflow_aip.hooks.registry import ModelRegistryHook, operation_view
from airflow_aip.hooks.storage import StorageHook
from airflow_aip.hooks.waiting import SyncWait
from airflow_aip.jobs.vertex.models import ModelRef
from airflow_aip.jobs.view import VERTEX
from airflow_aip.operators.connected import JobOperator
from airflow_aip.operators.export import evaluation_record, read_measurement
from airflow_aip.operators.promotion import ChampionKeeper, Outcome
from airflow_aip.operators.registry_args import RegistryArguments, model_page, promotions_alias, serving_image
from airflow_aip.operators.watching import defer_wait
from airflow_aip.registry.champion import Contender
from airflow_aip.registry.gate import Measurement
from airflow_aip.registry.upload import VersionSource, source_key, upload_request, version_source
from airflow_aip.triggers.model_operation import WHAT, ModelOperationTrigger, operation_event

# How a registry task reaches the API, as its template fields: a job API's, less the backend
# (the Model Registry is Vertex AI's alone).
API_TEMPLATE_FIELDS = tuple(field for field in API_FIELDS if field != "backend")


class _RegistryTask(RegistryArguments, JobOperator):
    """What both operators share: where the registry is, as whom, the ledger and the Asset.

    Their hooks are built from the task's job API (``job_api``), as every task's are: its
    connection, endpoint, identity, project, and the model's region. The backend is Vertex AI's,
    always: the Model Registry is Vertex AI's alone (it is no argument of theirs).
    """

    def __init__(
        self,
        *,
        champion_alias: str | None = "champion",
        ledger_uri: str | None = None,
        champion_asset: Asset | None = None,
        **kwargs: Any,
    ) -> None:
        if champion_asset is not None:  # the event is emitted only when the champion changes
            kwargs["outlets"] = [*(kwargs.get("outlets") or []), promotions_alias(champion_asset)]
        super().__init__(backend=VERTEX, **kwargs)
        self.champion_alias = champion_alias
        self.ledger_uri = ledger_uri
        self.champion_asset = champion_asset

    def job_region(self) -> str:
        return self.model_region()

    @cached_property
    def registry(self) -> ModelRegistryHook:
        return ModelRegistryHook.for_api(self.job_api)

    @cached_property
    def wait_registry(self) -> ModelRegistryHook:
        """``registry`` trying each read once, for waiting: the wait step owns outage policy."""
        return ModelRegistryHook.for_api(self.job_api, retry_attempts=1)

    def project(self) -> str:
        return self.registry.project_id

    @cached_property
    def storage(self) -> StorageHook:
        return StorageHook(self.gcp_conn_id, impersonation_chain=self.impersonation_chain)

    def keeper(self, model: ModelRef) -> ChampionKeeper:
        assert self.champion_alias
        assert self.ledger_uri
        return ChampionKeeper(
            self.registry, self.storage, model, self.champion_alias, self.ledger_uri, self.log
        )

    def announce(self, context: Context, extra: Mapping[str, Any]) -> None:
        """The Asset event of a champion that changed (nothing when there is no ``champion_asset``)."""
        if self.champion_asset is None:
            return
        context["outlet_events"][promotions_alias(self.champion_asset)].add(
            self.champion_asset, extra=dict(extra)
        )
        self.log.info("Asset event for %s: %s", self.champion_asset.name, dict(extra))


class RegisterModelOperator(_RegistryTask):
    """Upload an exported model as a version of ``model``; with ``champion_alias``, gate and promote it.

    :param manifest_uri: the export's ``manifest.json`` (the export task's XCom ``manifest_uri``).
    :param model: a model ID (``iris-classifier``: created by the first upload) or a model's
        resource name. Versions are added under it.
    :param display_name: the version's display name (default: the model ID).
    :param serving_container_image_uri: the container that serves it; default: Vertex AI's
        pre-built prediction container for ``framework`` at the version ``runtime_version``
        trains with.
    :param framework: ``scikit-learn``, ``xgboost``, ``tensorflow`` or ``pytorch``.
    :param runtime_version: AI Platform's runtime version (as given to the submit task).
    :param version_aliases: aliases the new version gets whatever the gate says (``candidate``).
    :param champion_alias: the alias the gate moves (None: no gate, no promotion).
    :param ledger_uri: the gs:// JSON object that records the champions (required with
        ``champion_alias``): promotions commit to it, a rollback reads it.
    :param champion_evaluation: a gs:// metrics file in which an evaluation-only job scored the
        champion on this run's evaluation data: the gate compares with that score (see
        :class:`~.export.ExportArtifactsOperator`, whose argument of this name it is).
    :param require_same_eval_data: refuse to move the alias when the two metrics were not
        measured on the same evaluation data (default False: compare, and say so).
    :param training_data: the data URIs the model was trained on (for its description).
    :param labels: more labels for the version.
    :param champion_asset: an Asset to emit an event for when the champion changes.
    :param deferrable: wait for the upload in the triggerer (default ``[operators] default_deferrable``).
    :param defer_after: deferrable: seconds first waited in the worker, so an upload of seconds
        ends the task with no deferral and no ``[aip] deferral_hold`` (default ``[aip] defer_after``).
    :param poll_interval: seconds between reads of the upload's operation.
    :param upload_timeout: seconds the upload may take before the task fails.
    """

    template_fields: Sequence[str] = (
        "manifest_uri",
        "model",
        "display_name",
        "serving_container_image_uri",
        "framework",
        "runtime_version",
        "version_aliases",
        "champion_alias",
        "ledger_uri",
        "champion_evaluation",
        "training_data",
        "labels",
        *API_TEMPLATE_FIELDS,
    )
    ui_color = "#e8f0fe"

    def __init__(
        self,
        *,
        manifest_uri: str,
        model: str,
        display_name: str | None = None,
        serving_container_image_uri: str | None = None,
        framework: str | None = None,
        runtime_version: str | None = None,
        version_aliases: Sequence[str] = (),
        training_data: Sequence[str] | str | None = None,
        labels: Mapping[str, str] | None = None,
        champion_evaluation: str | None = None,
        require_same_eval_data: bool = False,
        deferrable: bool = config.default_deferrable(),
        defer_after: float = config.defer_after(),
        poll_interval: float = 10.0,
        upload_timeout: float = 3600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.manifest_uri = manifest_uri
        self.model = model
        self.display_name = display_name
        self.serving_container_image_uri = serving_container_image_uri
        self.framework = framework
        self.runtime_version = runtime_version
        self.version_aliases = list(version_aliases)
        self.training_data = training_data
        self.labels = dict(labels or {})
        self.champion_evaluation = champion_evaluation
        self.require_same_eval_data = require_same_eval_data
        self.deferrable = deferrable
        self.defer_after = defer_after
        self.poll_interval = poll_interval
        self.upload_timeout = upload_timeout

    def execute(self, context: Context) -> dict[str, Any]:
        model, source = self._checked(context)
        key = source_key(source.artifact_uri)
        earlier = self.registry.find_version(model.name, key)
        if earlier is not None:
            self.log.info(
                "%s is already version %s (an earlier try): not uploaded again",
                source.artifact_uri,
                earlier["versionId"],
            )
            return self._finish(context, model, source, earlier, uploaded=False)
        body = upload_request(
            source,
            model=model,
            display_name=self.display_name or model.model_id,
            serving_image=serving_image(self, source),
            parent_exists=self.registry.get_model(model.name) is not None,
            aliases=self.version_aliases,
            labels=self.labels,
            data_uris=self.data_uris(),
        )
        self.log.info("Uploading %s as a new version of %s", source.artifact_uri, model.name)
        started = self.registry.upload(body, model=model.name, key=key)
        if "version" in started:
            return self._finish(context, model, source, started["version"], uploaded=True)
        operation = started["operation"]
        if not operation.get("done") and self.deferrable:
            ended = self._worker_wait(operation).run_for(self.defer_after)  # an upload of seconds ends here
            if ended is not None:
                return self._uploaded(context, model, source, ended)
            api = replace(self.job_api, region=model.location, project_id=self.registry.project_id)
            defer_wait(
                self,
                ModelOperationTrigger,
                wait_timeout=self.upload_timeout,
                operation_name=str(operation["name"]),
                poll_interval=self.poll_interval,
                **api.to_json(),
            )
        return self._uploaded(context, model, source, self._wait(operation))

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The upload's operation ended (or the wait did): finish as :meth:`execute` would have."""
        model, source = self._checked(context)
        return self._uploaded(context, model, source, event)

    # -- steps -----------------------------------------------------------------------------------

    def _checked(self, context: Context) -> tuple[ModelRef, VersionSource]:
        """Every argument checked, and the manifest read, before anything is written."""
        model = self.model_ref()
        self.check_gate_arguments()
        if self.champion_alias and self.champion_alias in self.version_aliases:
            raise ValidationError(
                "version_aliases", f"must not hold {self.champion_alias!r}: only the gate moves it"
            )
        if not str(self.manifest_uri or "").startswith("gs://"):
            raise ValidationError(
                "manifest_uri", f"must be the gs:// URI of an export manifest, got {self.manifest_uri!r}"
            )
        stored = self.storage.read_manifest(self.manifest_uri)
        if stored is None:
            raise ValidationError("manifest_uri", f"{self.manifest_uri} does not exist: did the export run?")
        return model, version_source(stored.content, self.manifest_uri)

    def _wait(self, operation: Mapping[str, Any]) -> dict[str, Any]:
        """Wait for the upload's operation in the worker (not deferrable): the trigger's event, here."""
        return self._worker_wait(operation).run(operation_view(str(operation["name"]), operation))

    def _worker_wait(self, operation: Mapping[str, Any]) -> SyncWait:
        name = str(operation["name"])
        return SyncWait(
            self.wait_registry,
            None,
            name,
            self.registry.project_id,
            job_name=name,
            poll_interval=self.poll_interval,
            deadline=time.time() + self.upload_timeout,
            log=self.log,
            what=WHAT,
            event_of=operation_event,
        )

    def _uploaded(
        self, context: Context, model: ModelRef, source: VersionSource, event: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The version the upload made, once the wait for its operation ended (here or deferred)."""
        if event.get("status") != "success":
            raise AipError(f"Model upload to {model.name}: {event.get('message')}")
        operation = event.get("operation") or {}
        version_id = str((operation.get("response") or {}).get("modelVersionId"))
        version = self.registry.get_model(model.at(version_id).versioned)
        if version is None:
            raise AipError(f"{model.at(version_id).versioned} is not readable after its upload")
        return self._finish(context, model, source, version, uploaded=True)

    def _finish(
        self,
        context: Context,
        model: ModelRef,
        source: VersionSource,
        version: Mapping[str, Any],
        *,
        uploaded: bool,
    ) -> dict[str, Any]:
        version_id = str(version["versionId"])
        self.log.info("Registered %s as %s", source.artifact_uri, model.at(version_id).versioned)
        outcome: Outcome | None = None
        measurement: Measurement | None = None
        if self.champion_alias:
            candidate = Contender(
                version_id,
                source.metric,
                source.metric_tag,
                source.goal,
                source.manifest_uri,
                source.job_id,
                source.eval_data,
            )
            measurement = read_measurement(
                self.storage, self.champion_evaluation, source.metric_tag or "metric", self.log
            )
            outcome = self.keeper(model).promote(
                candidate,
                at=_now(),
                run=_run(context),
                measurement=measurement,
                require_same_eval_data=self.require_same_eval_data,
            )
            self.log.info("%s: %s", "Promoted" if outcome.moved else "Not promoted", outcome.reason)
            if outcome.moved:
                self.announce(context, self._extra(model, version_id, source))
        aliases = (self.registry.get_model(model.at(version_id).versioned) or version).get(
            "versionAliases"
        ) or []
        self._lineage_result = result = {
            "model": model.name,
            "version_id": version_id,
            "version_name": model.at(version_id).versioned,
            "display_name": version.get("displayName"),
            "artifact_uri": source.artifact_uri,
            "manifest_uri": source.manifest_uri,
            "aliases": list(aliases),
            "uploaded": uploaded,
            "job_id": source.job_id,
            "trial_id": source.trial_id,
            "metric": source.metric,
            "metric_tag": source.metric_tag,
            "goal": source.goal,
            "champion_alias": self.champion_alias,
            "promoted": outcome.moved if outcome else None,
            "reason": outcome.reason if outcome else None,
            "champion_before": outcome.before.to_json() if outcome and outcome.before else None,
            "champion_metric": outcome.compared.metric if outcome and outcome.compared else None,
            "eval_data": source.eval_data,
            "eval_uri": source.eval_uri,
            "same_eval_data": outcome.same_data if outcome else None,
            "ledger_uri": self.ledger_uri,
            "console_url": model_page(self.registry, model, version_id),
            **evaluation_record(self.champion_evaluation, measurement),
        }
        return result

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (the optional provider calls this): the exported model in, the version out."""
        from airflow_aip.lineage import register_lineage, task_result

        result = task_result(self, task_instance)
        return register_lineage(result) if result else None

    def _extra(self, model: ModelRef, version_id: str, source: VersionSource) -> dict[str, Any]:
        return {
            "model": model.name,
            "version_id": version_id,
            "alias": self.champion_alias,
            "metric": source.metric,
            "metric_tag": source.metric_tag,
            "job_id": source.job_id,
            "trial_id": source.trial_id,
            "eval_data": source.eval_data,
            "action": "promoted",
        }


class RollbackChampionOperator(_RegistryTask):
    """Move ``champion_alias`` back to the champion before the current one, as the ledger records it.

    The version rolled back from stays registered, without the alias; a second rollback goes one
    champion further back. Arguments are :class:`RegisterModelOperator`'s of the same names.
    """

    template_fields: Sequence[str] = (
        "model",
        "champion_alias",
        "ledger_uri",
        *API_TEMPLATE_FIELDS,
    )
    ui_color = "#fce8e6"

    def __init__(self, *, model: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model

    def execute(self, context: Context) -> dict[str, Any]:
        model = self.model_ref()
        if not self.champion_alias:
            raise ValidationError("champion_alias", "is required: the alias to move back")
        self.check_gate_arguments()
        outcome = self.keeper(model).rollback(at=_now(), run=_run(context))
        self.log.info("%s: %s", model.name, outcome.reason)
        restored, removed = outcome.after, outcome.before
        assert restored is not None
        assert removed is not None
        self.announce(
            context,
            {
                "model": model.name,
                "version_id": restored.version_id,
                "alias": self.champion_alias,
                "metric": restored.metric,
                "metric_tag": restored.metric_tag,
                "job_id": restored.job_id,
                "action": "rolled_back",
                "from_version_id": removed.version_id,
            },
        )
        return {
            "model": model.name,
            "alias": self.champion_alias,
            "version_id": restored.version_id,
            "version_name": model.at(restored.version_id).versioned,
            "rolled_back_from": removed.version_id,
            "metric": restored.metric,
            "reason": outcome.reason,
            "console_url": model_page(self.registry, model, restored.version_id),
        }


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _run(context: Context) -> dict[str, Any]:
    ti = context["ti"]
    return {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": ti.run_id, "try_number": ti.try_number}
