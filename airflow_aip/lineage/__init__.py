"""OpenLineage inputs and outputs of the provider's tasks, built from what each task returned.

Airflow's OpenLineage provider (``apache-airflow-providers-openlineage``, the ``lineage`` extra)
calls ``get_openlineage_facets_on_complete(task_instance)`` on an operator after it succeeded;
the operators here hand their result (``task_result``) to one builder, which says which data and
which code made which model:

- build: the trainer's source directory in, the sdist out (with its sha256);
- stage: the sdists in, the staged gs:// packages out (with their sha256);
- submit: the gs:// data named in the job's args and the trainer packages in, the job's output
  directory out, and a run facet naming the job (resource name, state, best trial's metric);
- export: the job's (or best trial's) output in, the exported model out (with its metric);
- register: the exported model in, the Model Registry version out (aliases, metric).

Datasets are named by OpenLineage's naming spec (``openlineage.client.naming.dataset``) so ours
join those of other producers: Cloud Storage in ``uris``, local sdists in ``packages``, Vertex AI
models (which the spec lacks) in ``models``; ``facets`` makes the OpenLineage objects.

Importing this package is cheap: OpenLineage and the provider are imported inside the functions
(DAG files import the operators, and the provider is optional). Every builder returns None when
they are not installed, and reads the results leniently (``.get``): lineage never fails a task.
"""

from __future__ import annotations

from airflow_aip.lineage.facets import FILE_NAMESPACE, PRODUCER, SCHEMA_URL
from airflow_aip.lineage.models import export_lineage, register_lineage
from airflow_aip.lineage.packages import build_lineage, stage_lineage
from airflow_aip.lineage.results import task_result
from airflow_aip.lineage.training import submit_lineage
from airflow_aip.lineage.uris import gcs_dataset_id, gcs_uris_in_args, staged_sha256, values_under

__all__ = [
    "FILE_NAMESPACE",
    "PRODUCER",
    "SCHEMA_URL",
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
