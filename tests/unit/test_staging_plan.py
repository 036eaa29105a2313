"""plan_staging: content-addressed URIs, every bad input, and a built package from another machine.

"Another machine" is a build result whose file is gone (as on a worker that shares no disk with
the builder): the plan rebuilds it from its source, and stages it only with the build's sha256.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.packaging import build_sdist, sha256_file
from airflow_aip.staging_plan import plan_staging
from tests.fixtures.packaging import make_package, write


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    return [
        write(tmp_path / "trainer-0.1.tar.gz", "sdist"),
        write(tmp_path / "deps" / "dep1.tar.gz", "dep1"),
        write(tmp_path / "deps" / "dep2-1.0-py3-none-any.whl", "dep2"),
    ]


def test_plan_is_content_addressed_in_input_order(files: list[Path]) -> None:
    plan = plan_staging([str(files[0]), files[1], {"path": str(files[2])}], "gs://bucket/staging")
    assert [p.uri for p in plan] == [f"gs://bucket/staging/{sha256_file(f)}/{f.name}" for f in files]
    assert [p.local_path for p in plan] == files
    assert [p.sha256 for p in plan] == [sha256_file(f) for f in files]


def test_plan_accepts_a_single_built_package_and_gs_uris(files: list[Path]) -> None:
    built = {"path": str(files[0]), "sha256": sha256_file(files[0])}
    assert plan_staging(built, "gs://bucket")[0].uri.startswith("gs://bucket/")
    plan = plan_staging([built, "gs://other/deps/x.whl"], "gs://bucket/s/")
    assert plan[1].uri == "gs://other/deps/x.whl"
    assert plan[1].local_path is None


@pytest.mark.parametrize(
    ("packages", "staging_uri", "field", "rule"),
    [
        (["{0}"], "/tmp/staging", "staging_uri", "gs:// URI"),
        (["{0}"], "s3://bucket/x", "staging_uri", "gs:// URI"),
        (["{0}"], "gs://Bad_Bucket", "staging_uri", "lowercase"),
        (["{0}"], "gs://bucket/../x", "staging_uri", "'..'"),
        ([], "gs://bucket", "packages", "non-empty"),
        (None, "gs://bucket", "packages", "non-empty"),
        (["{missing}"], "gs://bucket", "packages[0]", "does not exist"),
        (["{0}", "{missing}"], "gs://bucket", "packages[1]", "does not exist"),
        (["{0}", "{0}"], "gs://bucket", "packages[1]", "repeats packages[0]"),
        (["{0}", "gs://b12/x/trainer-0.1.tar.gz"], "gs://bucket", "packages[1]", "repeats"),
        (["{txt}"], "gs://bucket", "packages[0]", ".whl"),
        (["gs://b12/x/notes.txt"], "gs://bucket", "packages[0]", ".whl"),
        (["gs://b12"], "gs://bucket", "packages[0]", "name an object"),
        ([{"sha256": "x"}], "gs://bucket", "packages[0]", "'path'"),
        ([{"path": "{0}", "sha256": "0" * 64}], "gs://bucket", "packages[0]", "changed since"),
        ([42], "gs://bucket", "packages[0]", "file path"),
    ],
)
def test_plan_rejects(
    files: list[Path], tmp_path: Path, packages: object, staging_uri: str, field: str, rule: str
) -> None:
    names = {"0": files[0], "missing": tmp_path / "nope.tar.gz", "txt": write(tmp_path / "notes.txt")}

    def fill(item: object) -> object:
        if isinstance(item, str) and item.startswith("{"):
            return str(names[item.strip("{}")])
        if isinstance(item, dict):
            return {k: fill(v) for k, v in item.items()}
        return item

    resolved = [fill(p) for p in packages] if isinstance(packages, list) else packages
    with pytest.raises(ValidationError) as err:
        plan_staging(resolved, staging_uri)
    assert err.value.field == field
    assert rule in err.value.rule


def test_plan_rejects_more_than_100_packages(tmp_path: Path) -> None:
    packages = [write(tmp_path / f"dep{i}.tar.gz", str(i)) for i in range(101)]
    with pytest.raises(ValidationError, match="at most 100"):
        plan_staging(packages, "gs://bucket")
    assert len(plan_staging(packages[:100], "gs://bucket")) == 100


# -- a built package whose file is on another machine -------------------------------------------


@pytest.fixture
def built_elsewhere(tmp_path: Path) -> dict[str, Any]:
    """A build result whose ``path`` no longer exists here: what a stage task on another worker sees."""
    built = build_sdist(make_package(tmp_path / "app"), tmp_path / "builder-tmp", epoch=1_700_000_000)
    shutil.rmtree(tmp_path / "builder-tmp")
    return built.to_dict()


def test_a_package_built_elsewhere_is_rebuilt_here_with_the_same_bytes(
    built_elsewhere: dict[str, Any], tmp_path: Path
) -> None:
    (entry,) = plan_staging([built_elsewhere], "gs://bucket/staging", tmp_path / "rebuild")
    assert entry.rebuilt
    assert entry.local_path is not None
    assert entry.local_path.is_relative_to(tmp_path / "rebuild")
    assert sha256_file(entry.local_path) == entry.sha256 == built_elsewhere["sha256"]
    assert entry.uri == f"gs://bucket/staging/{built_elsewhere['sha256']}/trainer-0.0.0.tar.gz"


def test_a_changed_source_is_refused_not_staged(built_elsewhere: dict[str, Any], tmp_path: Path) -> None:
    write(Path(built_elsewhere["source"]) / "task.py", "print('changed after the build')\n")
    with pytest.raises(ValidationError) as err:
        plan_staging([built_elsewhere], "gs://bucket/staging", tmp_path / "rebuild")
    assert err.value.field == "packages[0]"
    assert f"not the build task's {built_elsewhere['sha256']}" in err.value.rule
    assert "staging_uri=" in err.value.rule


def test_another_timestamp_is_another_package(built_elsewhere: dict[str, Any], tmp_path: Path) -> None:
    """The rebuild uses the build's timestamp: a different one would give different bytes."""
    with pytest.raises(ValidationError, match="sha256"):
        plan_staging(
            [{**built_elsewhere, "source_date_epoch": 0}], "gs://bucket/staging", tmp_path / "rebuild"
        )


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        ({"source": "{missing}"}, "packages[1]", "neither is its source"),
        ({"source": None}, "packages[1]", "does not exist"),
        ({"source": 7}, "packages[1].source", "directory"),
        ({"sha256": "abc"}, "packages[1].sha256", "hex sha256"),
        ({"sha256": None}, "packages[1].sha256", "hex sha256"),
        ({"source_date_epoch": "1700000000"}, "packages[1].source_date_epoch", "integer"),
        ({"source_date_epoch": -1}, "packages[1].source_date_epoch", "integer"),
    ],
)
def test_bad_build_results_are_refused_before_any_rebuild(
    built_elsewhere: dict[str, Any], tmp_path: Path, change: dict[str, Any], field: str, rule: str
) -> None:
    """packages[0] would need a rebuild: none happens when packages[1] is bad."""
    changed = {k: str(tmp_path / "nope") if v == "{missing}" else v for k, v in change.items()}
    with pytest.raises(ValidationError) as err:
        plan_staging([built_elsewhere, {**built_elsewhere, **changed}], "gs://b12/s", tmp_path / "rebuild")
    assert (err.value.field, rule in err.value.rule) == (field, True), err.value.rule
    assert not (tmp_path / "rebuild").exists()


def test_a_package_staged_by_its_build_task_is_used_as_staged(built_elsewhere: dict[str, Any]) -> None:
    uri = f"gs://bucket/staging/{built_elsewhere['sha256']}/trainer-0.0.0.tar.gz"
    (entry,) = plan_staging([{**built_elsewhere, "uri": uri}], "gs://other/staging")
    assert (entry.uri, entry.local_path) == (uri, None)
