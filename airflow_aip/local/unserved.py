"""Which of Google's API methods a request is, when this service does not serve it.

Google's APIs answer a method they have but do not serve (or do not enable) with HTTP 501
``UNIMPLEMENTED``: "Operation is not implemented, or supported, or enabled." The local service
serves a few methods of three APIs (aiplatform v1, ml v1, logging v2). A request for another
method of those APIs gets that answer, naming the method, so a client sees
``google.api_core.exceptions.MethodNotImplemented`` (or an HttpError 501) as it would for an
unsupported operation, not a 404 or 405 that would read as a wrong path. A path no API has stays a
404.

The methods are read from the discovery documents google-api-python-client installs (the same
ones :mod:`airflow_aip.jobs.schema` validates bodies against): each method's ``flatPath``, with
every ``{...}`` one path segment.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_aip.exceptions import AipError
from airflow_aip.jobs.schema import discovery_document

# Checked in this order: a path both name (``.../locations/{l}/studies``) reads as Vertex AI's.
DOCUMENTS = ("aiplatform.v1.json", "ml.v1.json", "logging.v2.json")
UNIMPLEMENTED_MESSAGE = "Operation is not implemented, or supported, or enabled."
_PARAMETER = re.compile(r"\{[^}]+\}")


def _methods(resource: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield from (resource.get("methods") or {}).values()
    for child in (resource.get("resources") or {}).values():
        yield from _methods(child)


def _pattern(flat_path: str) -> re.Pattern[str]:
    parts = _PARAMETER.split(flat_path)
    return re.compile("/" + "[^/:]+".join(re.escape(part) for part in parts) + "/?")


@functools.cache
def _table() -> tuple[tuple[str, re.Pattern[str], str], ...]:
    """``(HTTP method, path pattern, method id)`` of every method of the three APIs."""
    rows: list[tuple[str, re.Pattern[str], str]] = []
    for document in DOCUMENTS:
        try:
            methods = list(_methods(discovery_document(document)))
        except (AipError, OSError, KeyError):
            continue
        for method in methods:
            path = method.get("flatPath") or method.get("path")
            if path:
                rows.append((str(method["httpMethod"]), _pattern(str(path)), str(method["id"])))
    return tuple(rows)


def google_method(http_method: str, path: str) -> str | None:
    """The id of Google's API method (``aiplatform.projects.locations.models.delete``) this request is."""
    for verb, pattern, method_id in _table():
        if verb == http_method.upper() and pattern.fullmatch(path):
            return method_id
    return None


def unimplemented_message(method_id: str) -> str:
    """Google's words for an unserved method, then which one and who does not serve it."""
    return f"{UNIMPLEMENTED_MESSAGE} The local training service (aip-local) does not serve {method_id}."
