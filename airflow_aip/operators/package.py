"""Build the trainer sdist inside a DAG (``gcloud --package-path`` semantics, reproducible bytes).

The result goes to XCom as a dict, so ``StagePackagesOperator(packages=[build.output])`` can
stage it and verify it was not changed in between (by its sha256).

When tasks run on different workers, ``output_dir`` must be storage both can read: the default
is a fresh temporary directory on the machine that built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_aip.packaging import build_sdist


class BuildTrainerPackageOperator(BaseOperator):
    """Build ``package_path``'s sdist; return ``{path, sha256, name, version, size}``."""

    template_fields: Sequence[str] = ("package_path", "output_dir")
    ui_color = "#e8f0fe"

    def __init__(self, *, package_path: str, output_dir: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.package_path = package_path
        self.output_dir = output_dir

    def execute(self, context: Context) -> dict[str, Any]:
        built = build_sdist(self.package_path, self.output_dir)
        self.log.info(
            "Built %s %s: %s (%d bytes, sha256 %s)",
            built.name,
            built.version,
            built.path,
            built.size,
            built.sha256,
        )
        return built.to_dict()
