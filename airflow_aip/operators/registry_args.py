"""The register and rollback operators' arguments: checked once, before the first request.

A model given by ID lives in the task's project and region; a resource name carries its own.
The serving container is the user's, or Vertex AI's pre-built prediction container for the
framework at the version its training container has (:mod:`airflow_aip.jobs.vertex.serving`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, AssetAlias

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.machines import FRAMEWORK_IMAGES, executor_image
from airflow_aip.jobs.vertex.models import ModelRef, parse_model_name, validate_alias, validate_model_id
from airflow_aip.jobs.vertex.serving import serving_image_for, serving_of
from airflow_aip.uris import parse_gcs_uri

if TYPE_CHECKING:
    from airflow_aip.hooks.registry import ModelRegistryHook
    from airflow_aip.registry.upload import VersionSource

CONSOLE = (
    "https://console.cloud.google.com/vertex-ai/models/locations/{location}/models/{model}/versions/{version}"
)


def promotions_alias(asset: Asset) -> AssetAlias:
    """The outlet a task adds ``asset``'s event to, only when the champion changed."""
    return AssetAlias(name=f"{asset.name}__champion_changes")


class RegistryArguments:
    """Checks of the arguments the register and rollback operators share."""

    model: str
    project_id: str | None
    region: str | None
    champion_alias: str | None
    ledger_uri: str | None
    training_data: Any = None

    def model_ref(self) -> ModelRef:
        """The model, by resource name or by ID in the task's project and region."""
        text = str(self.model or "").strip()
        if text.startswith("projects/"):
            model = parse_model_name(text, "model")
            if model.version:
                raise ValidationError(
                    "model", f"names a version ({text}); give the model: versions are added"
                )
            return model
        validate_model_id(text, "model")
        return ModelRef(self.project(), self.model_region(), text)

    def model_region(self) -> str:
        """The model's location: its resource name's, else the task's region."""
        text = str(self.model or "").strip()
        if text.startswith("projects/"):
            return parse_model_name(text, "model").location
        if not self.region:
            raise ValidationError("region", "is required to name a model by its ID")
        return self.region

    def project(self) -> str:
        """The project a model given by ID lives in (the registry hook resolves it)."""
        raise NotImplementedError

    def check_gate_arguments(self) -> None:
        if not self.champion_alias:
            return
        validate_alias(self.champion_alias, "champion_alias")
        if not self.ledger_uri:
            raise ValidationError("ledger_uri", "is required with champion_alias: promotions commit to it")
        parse_gcs_uri(self.ledger_uri, "ledger_uri", require_object=True)

    def data_uris(self) -> list[str]:
        """``training_data`` as a list: a list, one URI, or a list's JSON (a rendered template)."""
        value = self.training_data
        if isinstance(value, str):
            text = value.strip()
            value = json.loads(text) if text.startswith("[") else [text] if text else []
        if value is None:
            return []
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ValidationError("training_data", f"must be a list of URIs, got {self.training_data!r}")
        return list(value)


def serving_image(task: Any, source: VersionSource) -> str:
    """The serving container: the user's, else the pre-built one for ``framework`` and ``runtime_version``."""
    given = task.serving_container_image_uri
    if given:
        if "docker.pkg.dev/vertex-ai/prediction/" in given and serving_of(given) is None:
            raise ValidationError(
                "serving_container_image_uri",
                f"{given} is not one of Vertex AI's pre-built prediction containers",
            )
        return str(given)
    framework = task.framework
    if framework not in FRAMEWORK_IMAGES:
        raise ValidationError(
            "framework",
            f"must be one of {sorted(FRAMEWORK_IMAGES)} to choose a serving container (or give "
            f"serving_container_image_uri); got {framework!r}",
        )
    region = task.model_region()
    if task.runtime_version:
        spec = {"runtimeVersion": task.runtime_version, "region": region}
        training = executor_image(spec, framework, gpu=False)
    else:
        training = f"us-docker.pkg.dev/vertex-ai/training/{FRAMEWORK_IMAGES[framework][0]}:latest"
    return serving_image_for(training, region)


def model_page(registry: ModelRegistryHook, model: ModelRef, version_id: str) -> str | None:
    """Where a person sees the version: the local service's console page, or Google's console."""
    local = registry.local_page(model.name)
    if local:
        return local
    url = CONSOLE.format(location=model.location, model=model.model_id, version=version_id)
    return f"{url}?project={model.project}"
