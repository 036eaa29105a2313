"""The names our OpenLineage facets go by: who produced them and the schema they follow.

Apart from :mod:`.facets` so that :mod:`.facet_types` (imported only when a task reports) reads
them without importing the module that imports it.
"""

from __future__ import annotations

from airflow_aip import __version__

# No public schema is published for our facets: a URN names them (and us) without pretending one.
PRODUCER = f"urn:airflow-aip:{__version__}"
SCHEMA_URL = "urn:airflow-aip:openlineage-facets:1-0-0"
