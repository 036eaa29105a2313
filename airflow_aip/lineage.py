"""OpenLineage inputs and outputs of the provider's tasks, built from what each task returned.

Airflow's OpenLineage provider (``apache-airflow-providers-openlineage``, the ``lineage`` extra)
calls ``get_openlineage_facets_on_complete(task_instance)`` on an operator after it succeeded;
the operators here hand their result to one function of this module, which says which data and
which code made which model:

- build: the trainer's source directory in, the sdist out (with its sha256);
- stage: the sdists in, the staged gs:// packages out (with their sha256);
- submit: the gs:// data named in the job's args and the trainer packages in, the job's output
  directory out, and a run facet naming the job (resource name, state, best trial's metric);
- export: the job's (or best trial's) output in, the exported model out (with its metric);
- register: the exported model in, the Model Registry version out (aliases, metric).

Dataset naming follows OpenLineage's naming spec (``openlineage.client.naming.dataset``): Cloud
Storage is namespace ``gs://{bucket}``, name the object path without a trailing slash (``/`` for
a bucket root; a wildcard stands for its folder), as the Google provider's
``extract_ds_name_from_gcs_path`` names them, so our datasets join theirs. A built sdist is a
local file: namespace ``file`` (the spec's local file system), name its absolute path as the build
task reported it: the stage task names the same dataset even when it ran on another worker and
rebuilt the file, and the sha256 facet says the bytes are the same. The spec has no entry for
Vertex AI: a registered model is namespace ``vertexai://{project}/{location}``, name
``models/{model_id}`` (its resource name below the location), its version in the standard
``version`` facet, so every version of one model is one dataset with versions. The scheme is
the platform name DataHub gives Vertex AI (``vertexai``), as ``gs`` names Cloud Storage.

Importing this module is cheap: OpenLineage and the provider are imported inside the functions
(DAG files import the operators, and the provider is optional). Every builder returns None when
they are not installed, and reads the results leniently (``.get``): lineage never fails a task.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from airflow_aip import __version__

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

__all__ = [
    "FILE_NAMESPACE",
    "build_lineage",
    "export_lineage",
    "gcs_dataset_id",
    "gcs_uris_in_args",
    "register_lineage",
    "stage_lineage",
    "staged_sha256",
    "submit_lineage",
    "task_result",
    "values_under",
]

FILE_NAMESPACE = "file"
VERTEX_SCHEME = "vertexai://"
# No public schema is published for our facets: a URN names them (and us) without pretending one.
PRODUCER = f"urn:airflow-aip:{__version__}"
SCHEMA_URL = "urn:airflow-aip:openlineage-facets:1-0-0"
PACKAGE_FACET = "aipPackage"
JOB_FACET = "aipTrainingJob"
MODEL_FACET = "aipModel"
MODEL_VERSION_FACET = "aipModelVersion"

_SHA256 = re.compile(r"[0-9a-f]{64}")
_MODEL_NAME = re.compile(
    r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/(?P<model>models/[^/@]+)"
)
# Flags whose gs:// value the trainer writes to: outputs, never inputs.
_OUTPUT_FLAGS = frozenset({"--job-dir", "--job_dir"})


def task_result(operator: Any, task_instance: Any) -> Any:
    """What the task returned, as the operator kept it on itself (``_lineage_result``); else None.

    Kept on ``self``, never pulled from XCom: the provider calls the lineage method on the very
    operator instance that ran ``execute`` (or ``resume_execution``, after a deferral), but by
    default in a fork of the task process, which must not talk to the API server over the
    connection it inherited (a child terminated mid-request leaves it broken; under
    ``dag.test()``'s in-process supervisor an ``xcom_pull`` there hangs until the provider kills
    the child). Kept on ``self`` it also holds with ``do_xcom_push=False``. ``task_instance`` is
    the provider's argument, unused.
    """
    del task_instance
    return getattr(operator, "_lineage_result", None)


# -- naming (pure) -----------------------------------------------------------------------


def gcs_dataset_id(uri: Any) -> tuple[str, str] | None:
    """``gs://b/a/c/`` -> ``("gs://b", "a/c")``; ``gs://b`` -> ``("gs://b", "/")``; else None.

    A wildcard (``gs://b/data/part-*``) names its folder (``data``): the files it matches are
    decided when they are read, the folder is what a lineage graph can join on.
    """
    if not isinstance(uri, str) or not uri.startswith("gs://"):
        return None
    bucket, _, path = uri[len("gs://") :].partition("/")
    if not bucket:
        return None
    if "*" in path:
        path = path.split("*", 1)[0].rpartition("/")[0]
    return f"gs://{bucket}", path.strip("/") or "/"


def gcs_uris_in_args(args: Any, exclude_under: str | None = None) -> list[str]:
    """The gs:// values in a trainer's args, in order, once each: what the job reads.

    Values of ``--flag gs://...``, ``--flag=gs://...``, bare positional URIs and comma-separated
    lists of them. ``--job-dir`` and anything below ``exclude_under`` (the job's output
    directory) are what the job writes, not inputs.
    """
    below = exclude_under.rstrip("/") + "/" if exclude_under else None
    found: list[str] = []
    for flag, value in _flag_values(args):
        if flag in _OUTPUT_FLAGS:
            continue
        for uri in value.split(","):
            uri = uri.strip()
            if uri.startswith("gs://") and uri not in found and not _is_below(uri, below):
                found.append(uri)
    return found


def _flag_values(args: Any) -> Iterator[tuple[str | None, str]]:
    """``(flag, value)`` of each value in an args list; the flag is None for a positional value."""
    if not isinstance(args, list | tuple):
        return
    flag: str | None = None
    for token in (str(a) for a in args if isinstance(a, str | int | float)):
        if token.startswith("-") and "=" in token:
            name, _, value = token.partition("=")
            yield name, value
            flag = None
        elif token.startswith("-"):
            flag = token
        else:
            yield flag, token
            flag = None


def _is_below(uri: str, prefix: str | None) -> bool:
    return prefix is not None and (uri.rstrip("/") + "/").startswith(prefix)


def values_under(spec: Any, key: str) -> list[str]:
    """Every string in a list under ``key``, at any depth of a job spec: ``args``, ``packageUris``.

    One walk reads ml v1's ``trainingInput`` and every Vertex AI worker pool's
    ``pythonPackageSpec`` alike.
    """
    found: list[str] = []
    if isinstance(spec, Mapping):
        for name, value in spec.items():
            if name == key and isinstance(value, list | tuple):
                found.extend(str(v) for v in value if isinstance(v, str | int | float))
            else:
                found.extend(values_under(value, key))
    elif isinstance(spec, list | tuple):
        for item in spec:
            found.extend(values_under(item, key))
    return found


def _loaded(spec: Any) -> Any:
    """A config file path read as the operator reads it; anything unreadable adds nothing."""
    if not isinstance(spec, str | os.PathLike):
        return spec
    from airflow_aip.jobs import load_job_config

    try:
        return load_job_config(spec)
    except Exception:  # lineage never fails a task: the operator already reported a bad config
        return None


def staged_sha256(uri: Any) -> str | None:
    """The sha256 a content-addressed staged URI carries: ``{staging}/{sha256}/{basename}``."""
    if not isinstance(uri, str):
        return None
    parts = uri.rstrip("/").split("/")
    return parts[-2] if len(parts) >= 2 and _SHA256.fullmatch(parts[-2]) else None


# -- OpenLineage objects (lazy) --------------------------------------------------------------


def _openlineage() -> Any:
    """The provider's OperatorLineage; ImportError when the provider is not installed."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage


@cache
def _facet_classes() -> dict[str, type[Any]]:
    """Our facet classes, defined on first use (they derive from OpenLineage's, imported lazily).

    Registered in this module under their names, so they pickle like module-level classes.
    """
    import attrs
    from openlineage.client.facet_v2 import DatasetFacet, RunFacet

    # Field names are camelCase, as OpenLineage's own facets' are.
    @attrs.define
    class AipPackageDatasetFacet(DatasetFacet):
        """A trainer package's content: its sha256 ties a model to the exact code that made it."""

        sha256: str | None = None
        packageName: str | None = None
        packageVersion: str | None = None
        size: int | None = None

        @staticmethod
        def _get_schema() -> str:
            return f"{SCHEMA_URL}#/$defs/AipPackageDatasetFacet"

    @attrs.define
    class AipTrainingJobRunFacet(RunFacet):
        """The training job this task ran: which one, how it ended, and its best trial's metric."""

        jobId: str | None = None
        name: str | None = None
        backend: str | None = None
        state: str | None = None
        projectId: str | None = None
        region: str | None = None
        consoleUrl: str | None = None
        hyperparameterTuning: bool = False
        metricTag: str | None = None
        goal: str | None = None
        bestTrialId: str | None = None
        bestMetric: float | None = None

        @staticmethod
        def _get_schema() -> str:
            return f"{SCHEMA_URL}#/$defs/AipTrainingJobRunFacet"

    @attrs.define
    class AipModelDatasetFacet(DatasetFacet):
        """An exported model: the job (and trial) it came from, and its metric."""

        jobId: str | None = None
        trialId: str | None = None
        metric: float | None = None
        metricTag: str | None = None
        manifestUri: str | None = None
        promoted: bool | None = None

        @staticmethod
        def _get_schema() -> str:
            return f"{SCHEMA_URL}#/$defs/AipModelDatasetFacet"

    @attrs.define
    class AipModelVersionDatasetFacet(DatasetFacet):
        """A Model Registry version: its names, aliases, metric and whether it became champion."""

        model: str | None = None
        versionId: str | None = None
        versionName: str | None = None
        aliases: list[str] = attrs.Factory(list)
        metric: float | None = None
        metricTag: str | None = None
        promoted: bool | None = None
        jobId: str | None = None
        manifestUri: str | None = None

        @staticmethod
        def _get_schema() -> str:
            return f"{SCHEMA_URL}#/$defs/AipModelVersionDatasetFacet"

    classes: list[type[Any]] = [
        AipPackageDatasetFacet,
        AipTrainingJobRunFacet,
        AipModelDatasetFacet,
        AipModelVersionDatasetFacet,
    ]
    for cls in classes:
        cls.__qualname__ = cls.__name__
        globals()[cls.__name__] = cls
    return {cls.__name__: cls for cls in classes}


def _facet(kind: str, /, **fields: Any) -> Any:
    return _facet_classes()[kind](**fields, producer=PRODUCER)


def _dataset(namespace: str, name: str, facets: Mapping[str, Any] | None = None) -> Dataset:
    from openlineage.client.event_v2 import Dataset

    return Dataset(namespace=namespace, name=name, facets=dict(facets or {}))


def _gcs(uri: Any, facets: Mapping[str, Any] | None = None) -> Dataset | None:
    ids = gcs_dataset_id(uri)
    return _dataset(*ids, facets) if ids else None


def _package_facets(sha256: Any, built: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The standard ``version`` facet (the sha256: the content is the version) and ours."""
    if not isinstance(sha256, str) or not sha256:
        return {}
    from openlineage.client.facet_v2 import dataset_version_dataset

    built = built or {}
    size = built.get("size")
    return {
        "version": dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=sha256, producer=PRODUCER
        ),
        PACKAGE_FACET: _facet(
            "AipPackageDatasetFacet",
            sha256=sha256,
            packageName=_str_or_none(built.get("name")),
            packageVersion=_str_or_none(built.get("version")),
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        ),
    }


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _float_or_none(value: Any) -> float | None:
    from airflow_aip.jobs.trials import finite_number

    return finite_number(value)


def _lineage(
    inputs: Iterable[Dataset | None] = (),
    outputs: Iterable[Dataset | None] = (),
    run_facets: Mapping[str, Any] | None = None,
) -> OperatorLineage[Any, Any]:
    """One OperatorLineage, each dataset once (by namespace and name), in order."""
    lineage: OperatorLineage[Any, Any] = _openlineage()(
        inputs=_unique(inputs), outputs=_unique(outputs), run_facets=dict(run_facets or {})
    )
    return lineage


def _unique(datasets: Iterable[Dataset | None]) -> list[Dataset]:
    seen: dict[tuple[str, str], Dataset] = {}
    for dataset in datasets:
        if dataset is not None:
            seen.setdefault((dataset.namespace, dataset.name), dataset)
    return list(seen.values())


# -- one builder per task ----------------------------------------------------------------------


def build_lineage(built: Any) -> OperatorLineage[Any, Any] | None:
    """BuildTrainerPackageOperator: source directory in; the sdist (and its staged URI) out."""
    try:
        _openlineage()
    except ImportError:
        return None
    if not isinstance(built, Mapping):
        return _lineage()
    facets = _package_facets(built.get("sha256"), built)
    source, path = built.get("source"), built.get("path")
    return _lineage(
        inputs=[_dataset(FILE_NAMESPACE, str(source)) if source else None],
        outputs=[
            _dataset(FILE_NAMESPACE, str(path), facets) if path else None,
            _gcs(built.get("uri"), facets),
        ],
    )


def stage_lineage(packages: Any, staged: Any) -> OperatorLineage[Any, Any] | None:
    """StagePackagesOperator: each package in (a built sdist, a path, a gs:// URI), its staged URI out.

    ``packages`` is the operator's (rendered) argument, ``staged`` its result: the same order.
    The sha256 comes from the build's result, else from the staged URI, which is named by it.
    """
    try:
        _openlineage()
    except ImportError:
        return None
    items = [packages] if isinstance(packages, str | os.PathLike | Mapping) else list(packages or [])
    uris = list(staged) if isinstance(staged, list | tuple) else []
    uris += [None] * (len(items) - len(uris))
    inputs, outputs = [], []
    for item, uri in zip(items, uris, strict=False):
        built = item if isinstance(item, Mapping) else None
        given = (built.get("uri") or built.get("path")) if built else item
        sha256 = (built or {}).get("sha256") or staged_sha256(uri)
        facets = _package_facets(sha256, built)
        if isinstance(given, str) and given.startswith("gs://"):
            inputs.append(_gcs(given, facets))  # staged already (or given as a URI): used as is
            continue
        if isinstance(given, str | os.PathLike) and str(given):
            path = str(given) if built else os.path.abspath(given)
            inputs.append(_dataset(FILE_NAMESPACE, path, facets))
        outputs.append(_gcs(uri, facets))
    return _lineage(inputs, outputs)


def submit_lineage(
    summary: Any, args: Any = None, package_uris: Any = None, specs: Sequence[Any] = ()
) -> OperatorLineage[Any, Any] | None:
    """SubmitTrainingJobOperator: the data in its args and its packages in, its output directory out.

    ``args`` and ``package_uris`` are the operator's rendered arguments, ``specs`` the other
    places a job's args and packages may come from (``training_input``, ``config``, a Vertex AI
    ``vertex_job``). The job itself is a run facet, not a dataset.
    """
    try:
        _openlineage()
    except ImportError:
        return None
    summary = summary if isinstance(summary, Mapping) else {}
    output_dir = _str_or_none(summary.get("output_dir"))
    loaded = [_loaded(spec) for spec in specs]
    all_args = list(args or []) if isinstance(args, list | tuple) else []
    packages = list(package_uris or []) if isinstance(package_uris, list | tuple) else []
    for spec in loaded:
        all_args += values_under(spec, "args")
        packages += values_under(spec, "packageUris")
    data = [_gcs(uri) for uri in gcs_uris_in_args(all_args, exclude_under=output_dir)]
    code = [_gcs(uri, _package_facets(staged_sha256(uri))) for uri in packages]
    run_facets = {JOB_FACET: _job_facet(summary)} if summary else {}
    return _lineage(inputs=data + code, outputs=[_gcs(output_dir)], run_facets=run_facets)


def _job_facet(summary: Mapping[str, Any]) -> Any:
    from airflow_aip.jobs.trials import objective_value

    best = summary.get("best_trial")
    best = best if isinstance(best, Mapping) else {}
    return _facet(
        "AipTrainingJobRunFacet",
        jobId=_str_or_none(summary.get("job_id")),
        name=_str_or_none(summary.get("name")),
        backend=_str_or_none(summary.get("backend")),
        state=_str_or_none(summary.get("state")),
        projectId=_str_or_none(summary.get("project_id")),
        region=_str_or_none(summary.get("region")),
        consoleUrl=_str_or_none(summary.get("console_url")),
        hyperparameterTuning=bool(summary.get("is_hyperparameter_tuning_job")),
        metricTag=_str_or_none(summary.get("hyperparameter_metric_tag")),
        goal=_str_or_none(summary.get("goal")),
        bestTrialId=_str_or_none(best.get("trialId")),
        bestMetric=objective_value(best),
    )


def export_lineage(result: Any) -> OperatorLineage[Any, Any] | None:
    """ExportArtifactsOperator: the job's model in; the exported copy out, only when it was exported.

    ``result`` is the task's XCom with ``source_uri`` (the manifest's key: the folder the model
    was copied from) and ``job_output_dir``, which the operator keeps beside it. The job's output
    directory is an input too when the model lies in it: it is the dataset the training task
    wrote, so the graph joins the model to the job, its data and its code. A champion that was
    not beaten leaves the inputs alone.
    """
    try:
        _openlineage()
    except ImportError:
        return None
    result = result if isinstance(result, Mapping) else {}
    output = None
    if result.get("exported"):
        model = _facet(
            "AipModelDatasetFacet",
            jobId=_str_or_none(result.get("job_id")),
            trialId=_str_or_none(result.get("trial_id")),
            metric=_float_or_none(result.get("metric")),
            metricTag=_str_or_none(result.get("metric_tag")),
            manifestUri=_str_or_none(result.get("manifest_uri")),
            promoted=result.get("promoted"),
        )
        output = _gcs(result.get("destination"), {MODEL_FACET: model})
    source, job_dir = result.get("source_uri"), result.get("job_output_dir")
    inputs = [_gcs(source)]
    if isinstance(source, str) and isinstance(job_dir, str) and _is_below(source, job_dir.rstrip("/") + "/"):
        inputs.append(_gcs(job_dir))
    return _lineage(inputs=inputs, outputs=[output])


def register_lineage(result: Mapping[str, Any]) -> Any:
    """RegisterModelOperator: the exported model (``artifact_uri``) in; the registry version out.

    The output is namespace ``vertexai://{project}/{location}``, name ``models/{model_id}``, with
    the version in the standard ``version`` facet and its names, aliases and metric in ours.
    None when the OpenLineage provider is not installed.
    """
    try:
        _openlineage()
    except ImportError:
        return None
    result = result if isinstance(result, Mapping) else {}
    version_id = _str_or_none(result.get("version_id"))
    aliases = result.get("aliases")
    facets: dict[str, Any] = {
        MODEL_VERSION_FACET: _facet(
            "AipModelVersionDatasetFacet",
            model=_str_or_none(result.get("model")),
            versionId=version_id,
            versionName=_str_or_none(result.get("version_name")),
            aliases=[str(a) for a in aliases] if isinstance(aliases, list | tuple) else [],
            metric=_float_or_none(result.get("metric")),
            metricTag=_str_or_none(result.get("metric_tag")),
            promoted=result.get("promoted"),
            jobId=_str_or_none(result.get("job_id")),
            manifestUri=_str_or_none(result.get("manifest_uri")),
        )
    }
    if version_id:
        from openlineage.client.facet_v2 import dataset_version_dataset

        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=version_id, producer=PRODUCER
        )
    model = _model_dataset(result.get("model"), facets)
    return _lineage(inputs=[_gcs(result.get("artifact_uri"))], outputs=[model])


def _model_dataset(model: Any, facets: Mapping[str, Any]) -> Dataset | None:
    """``projects/P/locations/L/models/M`` -> ``vertexai://P/L`` + ``models/M``."""
    if not isinstance(model, str) or not model:
        return None
    match = _MODEL_NAME.fullmatch(model.split("@", 1)[0])
    if match is None:  # not a resource name: keep what was given, in the Vertex AI namespace
        return _dataset(VERTEX_SCHEME.rstrip(":/"), model, facets)
    return _dataset(f"{VERTEX_SCHEME}{match['project']}/{match['location']}", match["model"], facets)
