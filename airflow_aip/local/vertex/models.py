"""The Model Registry of the local service: aiplatform v1 ``models`` upload, get, list, aliases, versions.

Google's rules, as :mod:`airflow_aip.jobs.vertex.models` states them: a model is a set of
versions "1", "2"...; an alias is on one version at a time (merging it onto a version takes it
from the one that held it); the first version gets ``default``, a model always has exactly one,
and the bare name reads the version holding it. Names come back under the project *number*, as
the jobs face's do (:func:`~airflow_aip.local.store.project_number`).

An upload is a long-running operation: its version exists (get and list show it) once the
operation is done, ``upload_seconds`` after it was asked for (``aip-local serve
--model-upload-seconds``; 0: done in the upload's own answer). Operations are not timed: the
first read after that moment (of the operation, or of any model of its location) completes it.
So an upload still importing when the service stopped completes on the first read after a
restart, by the restarted service's import time. Completing is Vertex's import: with a pre-built
prediction container, ``artifactUri`` must hold exactly one of the files that container loads
(:mod:`.models_import`); if not, the operation ends with error code 9 (FAILED_PRECONDITION) and
no version, as on Vertex. ``models.delete`` and ``models.patch`` are :mod:`.models_edit`'s.

Every change is made under the store's one lock, read-modify-persist, so two merges racing for
an alias leave it on exactly one version. Reading Cloud Storage is done outside it.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.jobs.vertex.models import (
    DEFAULT_ALIAS,
    VERSION_ID,
    ModelRef,
    alias_changes,
    parse_model_name,
)
from airflow_aip.local.clock import now, parse_rfc3339, rfc3339
from airflow_aip.local.service import FailedPreconditionError, TrainingService
from airflow_aip.local.vertex import models_edit
from airflow_aip.local.vertex.models_import import (
    ArtifactLister,
    gcs_artifact_lister,
    import_error,
    new_operation,
    numeric_id,
)
from airflow_aip.local.vertex.models_query import (
    MODEL_FILTER_FIELDS,
    MODEL_ID_KEY,
    MODEL_ORDER_FIELDS,
    VERSION_FILTER_FIELDS,
    VERSION_ORDER_FIELDS,
    Item,
    ListQuery,
    Upload,
    check_merge,
    check_upload,
    ordered,
    page,
)
from airflow_aip.local.vertex.models_store import (
    EMPTY_RESPONSE,
    MODEL_SCHEMA,
    UPLOAD_RESPONSE,
    ModelKey,
    ModelStore,
    model_key,
    model_name,
    render_operation,
    render_version,
)
from airflow_aip.local.vertex.render import apply_read_mask
from airflow_aip.local.vertex.service import VertexJobs


class ModelRegistry:
    """The ``models`` methods over a :class:`ModelStore`."""

    def __init__(self, store: ModelStore, upload_seconds: float, artifacts: ArtifactLister) -> None:
        self.store = store
        self.upload_seconds = max(0.0, upload_seconds)
        self.artifacts = artifacts
        with store.lock:  # a first upload's reservation whose operation was never stored (a crash)
            pending = {(o["projectNumber"], o["location"], o["modelId"]) for o in self._undone()}
            for record in store.models():
                if not record["versions"] and model_key(record) not in pending:
                    store.drop_model(model_key(record))

    # -- names ------------------------------------------------------------------------------------

    def _ref(self, project: str, location: str, model: str) -> tuple[ModelKey, ModelRef]:
        number, location = VertexJobs.parent(project, location)
        ref = parse_model_name(f"projects/{project}/locations/{location}/models/{model}")
        return (number, location, ref.model_id), ref

    def _model(self, key: ModelKey) -> dict[str, Any]:
        """The stored model (lock held); 404 while it has no version (its first upload still imports)."""
        record = self.store.model(key)
        if record is None or not record["versions"]:
            raise JobNotFoundError(404, f"The Model {model_name(key)} does not exist.")
        return record

    @staticmethod
    def _version(record: Mapping[str, Any], wanted: str | None) -> dict[str, Any]:
        """The version a name's ``@...`` addresses (lock held): by ID, by alias, or (None) the default."""
        wanted = wanted or DEFAULT_ALIAS
        by_id = VERSION_ID.fullmatch(wanted) is not None
        for version in record["versions"]:
            if (version["versionId"] == wanted) if by_id else (wanted in version["aliases"]):
                found: dict[str, Any] = version
                return found
        name = model_name(model_key(record))
        raise JobNotFoundError(404, f"The Model version {name}@{wanted} does not exist.")

    # -- operations -------------------------------------------------------------------------------

    def _undone(self) -> list[dict[str, Any]]:
        return [o for o in self.store.operations() if o["kind"] == "upload" and not o.get("done")]

    def settle(self, number: str | None = None, location: str | None = None) -> None:
        """Complete the uploads of a location (all: None) whose import time has passed."""
        deadline = now() - timedelta(seconds=self.upload_seconds)
        with self.store.lock:
            due = [
                dict(o)
                for o in self._undone()
                if (number is None or o["projectNumber"] == number)
                and (location is None or o["location"] == location)
                and parse_rfc3339(o["createTime"]) <= deadline
            ]
        for operation in due:
            self._complete(operation)

    def _complete(self, snapshot: Mapping[str, Any]) -> None:
        error = import_error(snapshot["request"]["model"], self.artifacts)  # Cloud Storage, outside the lock
        with self.store.lock:
            operation = self.store.operation(
                (snapshot["projectNumber"], snapshot["location"], snapshot["operationId"])
            )
            if operation is None or operation.get("done"):
                return  # another reader completed it meanwhile
            operation = copy.deepcopy(operation)  # the stored one changes only once this is on disk
            key = (operation["projectNumber"], operation["location"], operation["modelId"])
            stamp = rfc3339()
            if error is not None:
                self._release(key)
                operation.update(done=True, error=error, updateTime=stamp)
            else:
                version_id = self._add_version(key, operation["request"], stamp)
                response = {"@type": UPLOAD_RESPONSE, "model": model_name(key), "modelVersionId": version_id}
                operation.update(done=True, response=response, updateTime=stamp)
            self.store.save_operation(operation)

    def _release(self, key: ModelKey) -> None:
        """Free a first upload's reserved model ID (lock held); a model with versions stays."""
        record = self.store.model(key)
        if record is not None and not record["versions"]:
            self.store.drop_model(key)

    def _add_version(self, key: ModelKey, request: Mapping[str, Any], stamp: str) -> str:
        """Commit an imported upload as the model's next version (lock held); its aliases move to it."""
        stored = self.store.model(key)
        if stored is None:  # cannot happen: versions and models are never all deleted
            raise JobNotFoundError(404, f"The Model {model_name(key)} does not exist.")
        record = copy.deepcopy(stored)
        aliases = list(request["aliases"])
        if not record["versions"]:
            record["createTime"] = stamp
            # "A default version alias will be created for the first version of the model"
            if DEFAULT_ALIAS not in aliases:
                aliases.append(DEFAULT_ALIAS)
        for version in record["versions"]:
            _take_aliases(version, aliases, stamp)
        version_id = str(record["nextVersion"])
        record["nextVersion"] += 1
        record["versions"].append(
            {
                "versionId": version_id,
                "model": copy.deepcopy(request["model"]),
                "aliases": aliases,
                "versionCreateTime": stamp,
                "versionUpdateTime": stamp,
            }
        )
        record["updateTime"] = stamp
        self.store.save_model(record)
        return version_id

    def get_operation(
        self, project: str, location: str, model: str | None, operation_id: str
    ) -> dict[str, Any]:
        number, location = VertexJobs.parent(project, location)
        self.settle(number, location)
        with self.store.lock:
            operation = self.store.operation((number, location, operation_id))
            if operation is None or (model is not None and operation["modelId"] != model):
                where = f"models/{model}/" if model is not None else ""
                name = f"projects/{number}/locations/{location}/{where}operations/{operation_id}"
                raise JobNotFoundError(404, f"Operation {name} does not exist.")
            return render_operation(operation)

    # -- the API ----------------------------------------------------------------------------------

    def upload(self, project: str, location: str, body: Any) -> dict[str, Any]:
        number, location = VertexJobs.parent(project, location)
        upload = check_upload(body, number, location)
        self.settle(number, location)
        with self.store.lock:
            key = self._target(number, location, upload)
            request = {"model": upload.model, "aliases": list(upload.aliases)}
            operation = new_operation("upload", key, done=False, request=request)
            try:
                self.store.save_operation(operation)
            except OSError:
                self._release(key)
                raise
        if self.upload_seconds == 0:
            self._complete(operation)
        with self.store.lock:
            return render_operation(
                self.store.operation((number, location, operation["operationId"])) or operation
            )

    def _target(self, number: str, location: str, upload: Upload) -> ModelKey:
        """The model a new version goes to (lock held): the parent, or a new one (reserved until imported)."""
        if upload.parent is not None:
            key = (number, location, upload.parent.model_id)
            self._model(key)
            return key
        if upload.model_id is not None and self.store.model((number, location, upload.model_id)) is not None:
            parent = f"projects/{number}/locations/{location}"
            raise JobAlreadyExistsError(409, f"Model with ID {upload.model_id} already exists in {parent}.")
        model_id = upload.model_id or numeric_id()
        while upload.model_id is None and self.store.model((number, location, model_id)) is not None:
            model_id = numeric_id()
        stamp = rfc3339()
        self.store.add_model(
            {
                "projectNumber": number,
                "location": location,
                "modelId": model_id,
                "createTime": stamp,  # reserved now; the first version's time once it is imported
                "updateTime": stamp,
                "nextVersion": 1,
                "versions": [],
            }
        )
        return (number, location, model_id)

    def get(self, project: str, location: str, model: str) -> dict[str, Any]:
        key, ref = self._ref(project, location, model)
        self.settle(*key[:2])
        with self.store.lock:
            record = self._model(key)
            return render_version(record, self._version(record, ref.version))

    def list_models(self, project: str, location: str, query: Mapping[str, str]) -> dict[str, Any]:
        number, location = VertexJobs.parent(project, location)
        parsed = ListQuery.parse(query, MODEL_FILTER_FIELDS, MODEL_ORDER_FIELDS)
        self.settle(number, location)
        items: list[Item] = []
        with self.store.lock:
            for record in self.store.models(number, location):
                if not record["versions"]:
                    continue
                shown = render_version(record, self._version(record, None))
                if parsed.node is None or parsed.node.matches({**shown, MODEL_ID_KEY: record["modelId"]}):
                    items.append((record["modelId"], shown))
        return page(ordered(items, parsed.order), parsed, "models", self._masked(parsed))

    def list_versions(
        self, project: str, location: str, model: str, query: Mapping[str, str]
    ) -> dict[str, Any]:
        key, ref = self._ref(project, location, model)
        if ref.version is not None:
            raise ValidationError("name", f"must name a model, not one of its versions; got {model!r}")
        parsed = ListQuery.parse(query, VERSION_FILTER_FIELDS, VERSION_ORDER_FIELDS)
        self.settle(*key[:2])
        with self.store.lock:
            record = self._model(key)
            shown = [(v["versionId"], render_version(record, v, versioned=True)) for v in record["versions"]]
        items = [item for item in shown if parsed.node is None or parsed.node.matches(item[1])]
        return page(ordered(items, parsed.order), parsed, "models", self._masked(parsed))

    @staticmethod
    def _masked(query: ListQuery) -> Callable[[dict[str, Any]], dict[str, Any]]:
        return lambda shown: apply_read_mask(shown, query.read_mask, MODEL_SCHEMA)

    def merge_aliases(self, project: str, location: str, model: str, body: Any) -> dict[str, Any]:
        key, ref = self._ref(project, location, model)
        added, removed = alias_changes(check_merge(body))
        if DEFAULT_ALIAS in removed:
            # [U] unverified: Google's status and wording; INVALID_ARGUMENT naming the field here.
            raise ValidationError(
                "versionAliases",
                "the default alias cannot be removed from a version: merge 'default' onto another version "
                "to move it there",
            )
        self._need_version(ref, "mergeVersionAliases")
        self.settle(*key[:2])
        with self.store.lock:
            record = copy.deepcopy(self._model(key))  # stored only once on disk
            target = self._version(record, ref.version)
            stamp = rfc3339()
            for version in record["versions"]:
                if version is not target:
                    _take_aliases(version, added, stamp)
            kept = [a for a in target["aliases"] if a not in removed]
            merged = kept + [a for a in added if a not in kept]
            if merged != target["aliases"]:
                target.update(aliases=merged, versionUpdateTime=stamp)
                record["updateTime"] = stamp
            self.store.save_model(record)
            return render_version(record, target)

    @staticmethod
    def _need_version(ref: ModelRef, method: str) -> None:
        if ref.version is None:
            raise ValidationError("name", f"{method} needs a version: {ref.name}@{{version ID or alias}}")

    def delete_version(self, project: str, location: str, model: str) -> dict[str, Any]:
        key, ref = self._ref(project, location, model)
        self._need_version(ref, "deleteVersion")
        self.settle(*key[:2])
        with self.store.lock:
            record = copy.deepcopy(self._model(key))  # stored only once on disk
            target = self._version(record, ref.version)
            name = f"{model_name(key)}@{target['versionId']}"
            if len(record["versions"]) == 1:
                raise FailedPreconditionError(
                    f"Cannot delete {name}: it is the only version of the model. Use DeleteModel instead."
                )
            if DEFAULT_ALIAS in target["aliases"]:
                raise FailedPreconditionError(
                    f"Cannot delete the default version {name}: move the default alias to another version "
                    "first."
                )
            record["versions"] = [v for v in record["versions"] if v is not target]
            record["updateTime"] = rfc3339()
            self.store.save_model(record)
            operation = new_operation("deleteVersion", key, done=True, response={"@type": EMPTY_RESPONSE})
            self.store.save_operation(operation)
            return render_operation(operation)

    def delete_model(self, project: str, location: str, model: str) -> dict[str, Any]:
        return models_edit.delete_model(self, project, location, model)

    def patch_model(
        self, project: str, location: str, model: str, body: Any, update_mask: str | None
    ) -> dict[str, Any]:
        return models_edit.patch_model(self, project, location, model, body, update_mask)

    def model_versions(self, project: str, location: str, model: str) -> list[dict[str, Any]]:
        """Every version of one model, oldest first (for its console page); 404 if it has none."""
        key, _ = self._ref(project, location, model)
        self.settle(*key[:2])
        with self.store.lock:
            record = self._model(key)
            return [render_version(record, version) for version in record["versions"]]

    def snapshot(self) -> list[dict[str, Any]]:
        """Every model with versions, each ``{name, modelId, displayName, versions: [Model...]}``
        (oldest first): what the console shows."""
        self.settle()
        with self.store.lock:
            out = []
            for record in self.store.models():
                if record["versions"]:
                    versions = [render_version(record, v) for v in record["versions"]]
                    default = self._version(record, None)
                    out.append(
                        {
                            "name": model_name(model_key(record)),
                            "modelId": record["modelId"],
                            "displayName": default["model"]["displayName"],
                            "versions": versions,
                        }
                    )
            return out


def _take_aliases(version: dict[str, Any], aliases: list[str], stamp: str) -> None:
    """Remove ``aliases`` from a version that held any: each alias is on one version at a time."""
    kept = [a for a in version["aliases"] if a not in aliases]
    if kept != version["aliases"]:
        version.update(aliases=kept, versionUpdateTime=stamp)


_REGISTRIES: weakref.WeakKeyDictionary[TrainingService, ModelRegistry] = weakref.WeakKeyDictionary()
_REGISTRIES_LOCK = threading.Lock()


def registry_of(service: TrainingService) -> ModelRegistry:
    """The service's one registry (the API and the console share it), under its data dir's ``models/``."""
    with _REGISTRIES_LOCK:
        registry = _REGISTRIES.get(service)
        if registry is None:
            config = service.config
            store = ModelStore(config.data_dir / "models")
            registry = ModelRegistry(
                store, config.model_upload_seconds, gcs_artifact_lister(config.storage_url)
            )
            _REGISTRIES[service] = registry
        return registry
