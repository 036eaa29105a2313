"""Which CSVs ``aip_retraining`` trains on (one rule, pure, so a unit test can read every branch), and
what it reads of the current champion.

Triggered by the Asset, a run trains on the event that triggered it. Triggered by hand (the
natural first try from the UI) it has no such event: it takes the form's two URIs when given,
else the newest event aip_prepare_data ever emitted, else it stops in one line saying what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

GCS_CSV_PATTERN = r"^gs://[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]/.+"
NOTHING_TO_TRAIN_ON = (
    "train_data/eval_data: no iris data yet. Trigger aip_prepare_data first (its run starts "
    "aip_retraining by itself), or give both CSVs as gs:// URIs in the form."
)


class NoTrainingDataError(ValueError):
    """Nothing to train on; the message says what to do."""


def pick_training_data(
    params: Mapping[str, Any],
    triggering_events: Sequence[Any],
    newest_events: Callable[[], Sequence[Any]],
) -> dict[str, str]:
    """``{"train", "eval", "source"}``: the form's URIs, the triggering event's, or the newest event's.

    ``newest_events`` is only called when needed (it asks the Airflow API); each event has the
    ``extra`` aip_prepare_data wrote (``train``, ``eval``).
    """
    train, evaluation = params.get("train_data"), params.get("eval_data")
    if train and evaluation:
        return {"train": train, "eval": evaluation, "source": "given in the form"}
    if train or evaluation:
        missing = "eval_data" if train else "train_data"
        raise NoTrainingDataError(f"{missing}: give both train_data and eval_data, or neither")
    if triggering_events:
        return _from_event(triggering_events[-1], "the Asset event that triggered this run")
    newest = newest_events()
    if not newest:
        raise NoTrainingDataError(NOTHING_TO_TRAIN_ON)
    return _from_event(newest[0], "the newest iris_training_data event (triggered by hand)")


def _from_event(event: Any, source: str) -> dict[str, str]:
    extra = getattr(event, "extra", None) or {}
    if not extra.get("train") or not extra.get("eval"):
        raise NoTrainingDataError(f"train_data/eval_data: {source} names no train and eval CSVs")
    return {"train": str(extra["train"]), "eval": str(extra["eval"]), "source": source}


def champion_hyperparameters(params: Mapping[str, Any]) -> dict[str, Any]:
    """The current champion's hyperparameters, from its manifest ({} when there is no champion)."""
    return dict(champion_manifest(params).get("hyperparameters") or {})


def champion_model_uri(params: Mapping[str, Any]) -> str | None:
    """The current champion's model directory (None: no champion): what an evaluation job scores."""
    uri = champion_manifest(params).get("model_uri")
    return str(uri) if uri else None


def champion_manifest(params: Mapping[str, Any]) -> dict[str, Any]:
    """The current champion's export manifest ({} when there is no champion).

    ``champion_store`` says where the champion is: the registry's alias (its version's
    ``artifactUri`` holds the export manifest) or the Cloud Storage champion manifest.
    """
    import json

    from aip_examples import CHAMPION_ALIAS, CHAMPION_MANIFEST_URI, REGISTRY_MODEL_ID
    from airflow_aip.hooks import StorageHook

    storage = StorageHook()
    manifest_uri: str | None = CHAMPION_MANIFEST_URI
    if params.get("champion_store") == "registry":
        from airflow_aip.hooks.registry import ModelRegistryHook

        registry = ModelRegistryHook(project_id=params["project_id"], region=params["region"])
        name = f"{registry.parent()}/models/{REGISTRY_MODEL_ID}@{CHAMPION_ALIAS}"
        version = registry.get_model(name)
        artifact = str((version or {}).get("artifactUri") or "").rstrip("/")
        manifest_uri = f"{artifact}/manifest.json" if artifact else None
    if not manifest_uri or not storage.exists(manifest_uri):
        return {}
    return dict(json.loads(storage.read_bytes(manifest_uri)))
