"""Google's Vertex AI SDK inside a local replica talks to the local service, never to Google.

Python imports ``sitecustomize`` at start-up from the first ``sys.path`` entry that holds one; the
service puts this file's directory first on a replica's ``PYTHONPATH``
(:mod:`airflow_aip.local.executor.trainer_io`). It imports nothing but the standard library and
does nothing until the trainer imports ``google.cloud.aiplatform`` (directly, or through
``vertexai``): then, once that package has loaded, it calls the SDK's own ``aiplatform.init`` with

- ``api_endpoint`` = ``$AIP_LOCAL_AIPLATFORM_ENDPOINT`` (the local service, plain http on
  loopback: the SDK's REST transport keeps a scheme it is given);
- ``api_transport="rest"`` (the local service speaks JSON over HTTP, not gRPC);
- ``project`` = ``$AIP_LOCAL_PROJECT_ID``: on Vertex the SDK turns ``CLOUD_ML_PROJECT_ID`` (the
  project number) into the project ID through Cloud Resource Manager, which is Google; the
  local service knows the ID and hands it over, so that call is never made.

The trainer's own ``aiplatform.init(...)`` afterwards still applies on top (its location,
experiment, staging bucket...); only an explicit ``api_endpoint`` or ``api_transport="grpc"``
of its own undoes this. Experiments (``init(experiment=...)``, ``start_run``, ``log_params``,
``log_metrics``: :mod:`airflow_aip.local.vertex.metadata`), TensorBoard and every other client
the SDK builds read the same settings, so they reach the local service too, which answers what
it serves and UNIMPLEMENTED for what it does not.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence

_PACKAGE = "google.cloud.aiplatform"
ENDPOINT_VARIABLE = "AIP_LOCAL_AIPLATFORM_ENDPOINT"
PROJECT_VARIABLE = "AIP_LOCAL_PROJECT_ID"


def point_sdk_at_local_service(aiplatform: types.ModuleType) -> None:
    """``aiplatform.init`` with the local service's endpoint, REST, and the job's project ID."""
    settings: dict[str, str] = {"api_transport": "rest"}
    endpoint = os.environ.get(ENDPOINT_VARIABLE)
    if endpoint:
        settings["api_endpoint"] = endpoint.rstrip("/")
    project = os.environ.get(PROJECT_VARIABLE)
    if project:
        settings["project"] = project
    aiplatform.init(**settings)


class _AfterLoad(importlib.abc.Loader):
    """The package's own loader, then :func:`point_sdk_at_local_service` on the loaded package."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        # Loaded once: the finder's work is done (a find_spec alone, as importlib.util.find_spec
        # makes, loads nothing, so the finder stays until the package is executed).
        sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _SdkFinder)]
        point_sdk_at_local_service(module)

    def __getattr__(self, name: str) -> object:
        """Everything else (resource readers, ``get_code``...) is the package's own loader's."""
        return getattr(self._loader, name)


class _SdkFinder(importlib.abc.MetaPathFinder):
    """Finds ``google.cloud.aiplatform`` as the other finders do, and wraps its loader once."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _PACKAGE:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec: importlib.machinery.ModuleSpec | None = (
                find(fullname, path, target) if find is not None else None
            )
            if spec is not None and spec.loader is not None:
                spec.loader = _AfterLoad(spec.loader)
                return spec
        return None


def install() -> None:
    """Watch for the SDK's import when the service asked for it (``$AIP_LOCAL_AIPLATFORM_ENDPOINT``)."""
    if os.environ.get(ENDPOINT_VARIABLE) and _PACKAGE not in sys.modules:
        sys.meta_path.insert(0, _SdkFinder())


install()
