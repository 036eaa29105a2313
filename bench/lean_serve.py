"""``aip-local serve`` with the image layers as they were before issue 37: the framework only.

The bench's baseline for submit -> RUNNING on the fuller environments, through the service's
own API in the same run: the same service, whose pre-built images' runtimes keep only their
framework requirement (``scikit-learn==1.6.*`` for sklearn-cpu.1-6), so each job installs the
trainer's declared dependencies itself, as it did before. Run as ``python -m bench.lean_serve
serve ...`` (the arguments of ``aip-local``).
"""

from __future__ import annotations

import dataclasses
import sys
from datetime import date

from airflow_aip.jobs.vertex import containers
from airflow_aip.jobs.vertex.containers import Runtime
from airflow_aip.local import cli
from airflow_aip.local.executor import plans


def _framework_only(uri: str, path: str = "executorImageUri", today: date | None = None) -> Runtime:
    runtime = containers.runtime_of(uri, path, today)
    return dataclasses.replace(runtime, requirements=(f"{runtime.framework}=={runtime.version}.*",))


if __name__ == "__main__":
    setattr(plans, "runtime_of", _framework_only)  # noqa: B010 - the bench's baseline, patched in
    sys.exit(cli.main())
