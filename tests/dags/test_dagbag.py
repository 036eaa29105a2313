"""The example DAGs parse cleanly, with no work done at import."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.fixtures.dagbag import parse_dag_folder

if TYPE_CHECKING:
    from airflow.dag_processing.dagbag import BundleDagBag

pytestmark = pytest.mark.dags

DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="module")
def dagbag() -> BundleDagBag:
    return parse_dag_folder(DAGS)  # type: ignore[no-any-return]


def test_no_import_errors(dagbag: BundleDagBag) -> None:
    assert dagbag.import_errors == {}


def test_trainers_are_kept_out_of_parsing(dagbag: BundleDagBag) -> None:
    files = {Path(d.fileloc).parent for d in dagbag.dags.values()}
    assert files == {DAGS}
