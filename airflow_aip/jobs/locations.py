"""The locations Vertex AI serves, read from ``aiplatform.v1.json``'s regional endpoints.

Both faces of the local service and both backends of the operators check a region with this
one rule, so ``mars-central1`` fails on a laptop rather than in the cloud. AI Platform's regions
are checked by the same list: its successor has no global endpoint for training, and "some
regions available in AI Platform are not available in Vertex AI".
"""

from __future__ import annotations

from functools import cache

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.schema import discovery_document

AIPLATFORM_V1 = "aiplatform.v1.json"


@cache
def vertex_locations() -> frozenset[str]:
    """The locations with an aiplatform endpoint in the discovery document."""
    endpoints = discovery_document(AIPLATFORM_V1).get("endpoints", [])
    return frozenset(str(e["location"]) for e in endpoints if e.get("location"))


def check_location(location: str, field: str = "location") -> str:
    """A location Vertex AI serves; anything else (``global``, ``mars-central1``) is refused."""
    if location not in vertex_locations():
        raise ValidationError(
            field,
            f"Vertex AI does not serve location {location!r} (there is no global endpoint for "
            "training); use one of its regions, e.g. us-central1 or europe-west4",
        )
    return location
