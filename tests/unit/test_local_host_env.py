"""What a process replica takes of this machine: the image's variables, and what ``--pass-env`` names."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_aip.local.cli import main
from airflow_aip.local.executor.host_env import SYSTEM_PATH, PassedEnv, image_env, pass_env_names


def test_the_image_environment_puts_the_runtime_first_and_a_home_of_the_replicas_own() -> None:
    env = image_env(Path("/envs/abc/bin/python"), Path("/work/job/workerpool0-0"))
    assert env == {
        "PATH": f"/envs/abc/bin:{SYSTEM_PATH}",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "HOME": "/work/job/workerpool0-0",
    }


def test_pass_env_names_come_from_the_variable_then_the_flags_each_once() -> None:
    assert pass_env_names(["B", "C,A", " D "], "A, B") == ("A", "B", "C", "D")
    assert pass_env_names(None, None) == ()
    with pytest.raises(ValueError, match=r"--pass-env 'HF-TOKEN': a variable's name is letters"):
        pass_env_names(["HF-TOKEN"], None)


def test_the_log_names_what_was_passed_and_what_this_machine_lacks_never_a_value() -> None:
    passed = PassedEnv.of(["WANDB_API_KEY", "HF_TOKEN"], {"WANDB_API_KEY": "secret", "OTHER": "x"})
    assert passed.values == {"WANDB_API_KEY": "secret"}
    assert passed.note() == (
        "Passed to the replicas from this machine's environment on purpose (--pass-env): "
        "WANDB_API_KEY; not set on this machine, so not passed: HF_TOKEN"
    )
    assert "secret" not in passed.note()
    assert "aip-local serve --pass-env NAME passes one" in PassedEnv.of([], {"X": "1"}).note()


def test_serve_refuses_a_malformed_name_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIP_LOCAL_PASS_ENV", raising=False)
    assert main(["serve", "--data-dir", str(tmp_path / "data"), "--pass-env", "OK,2BAD"]) == 2
    assert "--pass-env '2BAD'" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()
