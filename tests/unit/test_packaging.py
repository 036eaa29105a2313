"""build_sdist: gcloud --package-path semantics, reproducible bytes, and every bad input.

The builds are real (a setuptools subprocess), on trees made in tmp_path.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from airflow_aip.exceptions import PackagingError, ValidationError
from airflow_aip.packaging import (
    DEFAULT_EPOCH,
    BuiltPackage,
    build_sdist,
    kept_sdists_dir,
    sha256_file,
)
from tests.fixtures.packaging import make_package, write

SETUP_PY = """\
from setuptools import find_packages, setup
setup(name="my-trainer", version="1.2.3", packages=find_packages(), include_package_data=True)
"""


def snapshot(root: Path) -> dict[str, tuple[bytes, float]]:
    """Every path under root with its content and mtime: 'nothing left behind' means equal snapshots."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime)
        for p in sorted(root.rglob("*"))
    }


def members(archive: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(archive, "r:gz") as tar:
        return tar.getmembers()


# -- building -----------------------------------------------------------------------------------


def test_builds_with_parent_setup_py(tmp_path: Path) -> None:
    write(tmp_path / "app" / "setup.py", SETUP_PY)
    package = make_package(tmp_path / "app")
    built = build_sdist(package, tmp_path / "out")
    assert (built.name, built.version) == ("my-trainer", "1.2.3")
    assert built.path == tmp_path / "out" / "my_trainer-1.2.3.tar.gz"
    assert built.size == built.path.stat().st_size
    assert built.sha256 == sha256_file(built.path)
    names = {m.name for m in members(built.path)}
    assert {"my_trainer-1.2.3/trainer/task.py", "my_trainer-1.2.3/trainer/util/io.py"} <= names


def test_builds_with_pyproject_only(tmp_path: Path) -> None:
    write(
        tmp_path / "app" / "pyproject.toml",
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "proj-trainer"\nversion = "0.4"\n'
        '[tool.setuptools.packages.find]\ninclude = ["trainer*"]\n',
    )
    built = build_sdist(make_package(tmp_path / "app"), tmp_path / "out")
    assert (built.name, built.version) == ("proj-trainer", "0.4")
    assert "proj_trainer-0.4/trainer/util/io.py" in {m.name for m in members(built.path)}


def test_generated_setup_when_parent_has_none(tmp_path: Path) -> None:
    package = make_package(tmp_path / "app")
    make_package(tmp_path / "app", name="sibling")  # not part of the package: must stay out
    built = build_sdist(package, tmp_path / "out")
    assert (built.name, built.version) == ("trainer", "0.0.0")
    names = {m.name for m in members(built.path)}
    assert {
        "trainer-0.0.0/setup.py",
        "trainer-0.0.0/trainer/__init__.py",
        "trainer-0.0.0/trainer/task.py",
        "trainer-0.0.0/trainer/util/io.py",
        "trainer-0.0.0/trainer/config.yaml",
    } <= names
    assert not any("sibling" in name for name in names)


def test_generated_sdist_installs_with_its_data(tmp_path: Path) -> None:
    """What AI Platform Training does with it: pip install (here offline, into a target dir)."""
    built = build_sdist(make_package(tmp_path / "app"), tmp_path / "out")
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, "--target", str(target), str(built.path)],
        check=True,
        capture_output=True,
    )
    assert (target / "trainer" / "task.py").read_text() == "print('training')\n"
    assert (target / "trainer" / "util" / "io.py").exists()
    assert (target / "trainer" / "config.yaml").read_text() == "lr: 0.1\n"


@pytest.mark.parametrize("with_setup", [True, False])
def test_leaves_nothing_in_the_users_tree(tmp_path: Path, with_setup: bool) -> None:
    if with_setup:
        write(tmp_path / "app" / "setup.py", SETUP_PY)
    package = make_package(tmp_path / "app")
    before = snapshot(tmp_path / "app")
    build_sdist(package, tmp_path / "out")
    assert snapshot(tmp_path / "app") == before


def test_read_only_tree_builds(tmp_path: Path) -> None:
    """A trainer on a read-only tree (a DAGs folder synced read-only) still builds. Root writes
    through permission bits, so as root the directories are made immutable instead (chattr +i)."""
    write(tmp_path / "app" / "setup.py", SETUP_PY)
    package = make_package(tmp_path / "app")
    dirs = [tmp_path / "app", *[p for p in (tmp_path / "app").rglob("*") if p.is_dir()]]
    with read_only(dirs):
        with pytest.raises(PermissionError, match=r"Errno (1|13)\]"):
            (tmp_path / "app" / "probe").touch()  # the tree really is read-only
        assert build_sdist(package, tmp_path / "out").name == "my-trainer"


@contextmanager
def read_only(dirs: list[Path]) -> Iterator[None]:
    """``dirs`` unwritable for this user, root included, until the block ends."""
    if os.geteuid() == 0:
        names = [str(d) for d in dirs]
        subprocess.run(["chattr", "+i", *names], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", *names], check=True)
        return
    for d in dirs:
        d.chmod(0o555)
    try:
        yield
    finally:
        for d in dirs:
            d.chmod(0o755)


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system temporary directory, for this test only."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_default_output_is_kept_once_per_content_outside_the_tree(tmp_path: Path, temp_root: Path) -> None:
    app = make_package(tmp_path / "app")
    first, again = build_sdist(app), build_sdist(app)
    assert again.path == first.path
    assert first.path.exists()
    assert first.path.parent.parent == kept_sdists_dir()
    assert kept_sdists_dir().parent == temp_root
    assert first.path.parent.name == first.sha256[:32]
    assert kept_sdists_dir().stat().st_mode & 0o777 == 0o700
    write(app / "task.py", "print('changed')\n")
    changed = build_sdist(app)
    assert changed.path != first.path
    assert first.path.exists()
    assert changed.path.exists()
    assert len(list(kept_sdists_dir().iterdir())) == 2  # nothing else left behind in the temp root
    assert sorted(p.name for p in temp_root.iterdir()) == [kept_sdists_dir().name]


def test_a_kept_sdists_dir_others_can_write_is_refused(tmp_path: Path, temp_root: Path) -> None:
    kept_sdists_dir().chmod(0o777)
    with pytest.raises(PackagingError, match="no one else can write"):
        build_sdist(make_package(tmp_path / "app"))


def test_to_dict_is_json_ready(tmp_path: Path) -> None:
    built = build_sdist(make_package(tmp_path / "app"), tmp_path / "out")
    as_dict = built.to_dict()
    assert as_dict == {
        "path": str(built.path),
        "sha256": built.sha256,
        "name": "trainer",
        "version": "0.0.0",
        "size": built.size,
        "source": str(tmp_path / "app" / "trainer"),
        "source_date_epoch": DEFAULT_EPOCH,
    }
    restored = {**as_dict, "path": Path(as_dict["path"]), "source": Path(as_dict["source"])}
    assert BuiltPackage(**restored) == built


# -- reproducibility ----------------------------------------------------------------------------


def test_same_source_gives_identical_bytes(tmp_path: Path) -> None:
    package = make_package(tmp_path / "app")
    first = build_sdist(package, tmp_path / "one")
    os.utime(package / "task.py", (1_700_000_000, 1_700_000_000))  # a touch changes no content
    (package / "util" / "io.py").chmod(0o600)  # neither does a umask difference
    second = build_sdist(package, tmp_path / "two")
    assert first.sha256 == second.sha256
    assert first.path.read_bytes() == second.path.read_bytes()


def test_changed_source_changes_the_hash(tmp_path: Path) -> None:
    package = make_package(tmp_path / "app")
    first = build_sdist(package, tmp_path / "one")
    write(package / "task.py", "print('training v2')\n")
    assert build_sdist(package, tmp_path / "two").sha256 != first.sha256


def test_archive_is_normalised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = make_package(tmp_path / "app")
    (package / "run.sh").write_text("#!/bin/sh\n")
    (package / "run.sh").chmod(0o700)
    write(package / "MANIFEST.in")
    built = build_sdist(package, tmp_path / "out")
    entries = members(built.path)
    assert [m.name for m in entries] == sorted(m.name for m in entries)
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in entries} == {(0, 0, "", "", DEFAULT_EPOCH)}
    modes = {m.name.rsplit("/", 1)[-1]: m.mode for m in entries}
    assert modes["run.sh"] == 0o755
    assert modes["task.py"] == 0o644
    header = built.path.read_bytes()[:10]
    assert header[3] & 0x08 == 0, "gzip FNAME flag must be unset"
    assert header[4:8] == b"\0\0\0\0", "gzip mtime must be 0"
    with gzip.open(built.path) as gz:
        assert gz.read(1)  # still a valid gzip stream

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1234567890")
    later = build_sdist(package, tmp_path / "epoch")
    assert {m.mtime for m in members(later.path)} == {1234567890}


# -- bad input ----------------------------------------------------------------------------------


def assert_invalid(path: object, rule: str, out: Path, field: str = "package_path") -> None:
    with pytest.raises(ValidationError) as err:
        build_sdist(path, out)  # type: ignore[arg-type]
    assert err.value.field == field
    assert rule in err.value.rule
    assert not out.exists(), "nothing may be written for bad input"


def test_missing_path(tmp_path: Path) -> None:
    assert_invalid(tmp_path / "nope", "does not exist", tmp_path / "out")


def test_empty_path(tmp_path: Path) -> None:
    assert_invalid("", "non-empty", tmp_path / "out")


def test_path_is_a_file(tmp_path: Path) -> None:
    assert_invalid(write(tmp_path / "trainer.py"), "not a directory", tmp_path / "out")


def test_no_init_py(tmp_path: Path) -> None:
    write(tmp_path / "trainer" / "task.py")
    assert_invalid(tmp_path / "trainer", "no __init__.py", tmp_path / "out")


def test_directory_name_not_importable(tmp_path: Path) -> None:
    write(tmp_path / "my-trainer" / "__init__.py")
    assert_invalid(tmp_path / "my-trainer", "not a Python identifier", tmp_path / "out")


def test_symlink_escaping_the_tree(tmp_path: Path) -> None:
    package = make_package(tmp_path / "app")
    write(tmp_path / "secret.txt", "key")
    (package / "leak.txt").symlink_to(tmp_path / "secret.txt")
    assert_invalid(package, "escapes the package tree", tmp_path / "out")


def test_symlink_escaping_via_relative_dir_link(tmp_path: Path) -> None:
    write(tmp_path / "app" / "setup.py", SETUP_PY)
    package = make_package(tmp_path / "app")
    (package / "up").symlink_to("../..", target_is_directory=True)
    assert_invalid(package, "escapes the package tree", tmp_path / "out")


def test_symlink_inside_the_tree_is_followed(tmp_path: Path) -> None:
    package = make_package(tmp_path / "app")
    (package / "alias.py").symlink_to("task.py")
    built = build_sdist(package, tmp_path / "out")
    with tarfile.open(built.path) as tar:
        member = tar.getmember("trainer-0.0.0/trainer/alias.py")
        assert member.isfile()
        assert tar.extractfile(member).read() == b"print('training')\n"  # type: ignore[union-attr]


def test_dangling_symlink(tmp_path: Path) -> None:
    package = make_package(tmp_path / "app")
    (package / "gone.py").symlink_to(package / "missing.py")
    assert_invalid(package, "points to nothing", tmp_path / "out")


def test_symlink_loop(tmp_path: Path) -> None:
    package = make_package(tmp_path / "app")
    (package / "util" / "again").symlink_to(package, target_is_directory=True)
    assert_invalid(package, "symlink loop", tmp_path / "out")


def test_output_dir_is_a_file(tmp_path: Path) -> None:
    package = make_package(tmp_path / "app")
    with pytest.raises(ValidationError) as err:
        build_sdist(package, write(tmp_path / "out"))
    assert err.value.field == "output_dir"


def test_bad_source_date_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(ValidationError) as err:
        build_sdist(make_package(tmp_path / "app"), tmp_path / "out")
    assert err.value.field == "SOURCE_DATE_EPOCH"


def test_failing_setup_py_shows_its_output(tmp_path: Path) -> None:
    write(
        tmp_path / "app" / "setup.py", "print('custom step says: tensorflow missing')\nraise SystemExit(3)\n"
    )
    package = make_package(tmp_path / "app")
    with pytest.raises(PackagingError) as err:
        build_sdist(package, tmp_path / "out")
    assert "custom step says: tensorflow missing" in str(err.value)
    assert "exit 3" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_missing_build_backend_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "app" / "pyproject.toml", '[build-system]\nbuild-backend = "no_such_backend_xyz"\n')
    with pytest.raises(PackagingError, match="no_such_backend_xyz"):
        build_sdist(make_package(tmp_path / "app"), tmp_path / "out")


def test_invalid_pyproject(tmp_path: Path) -> None:
    write(tmp_path / "app" / "pyproject.toml", "[build-system\n")
    assert_invalid(make_package(tmp_path / "app"), "not valid TOML", tmp_path / "out")
