"""Which primitives this Airflow core has (airflow_aip.compat), and what a task says when one is missing."""

from __future__ import annotations

import uuid

import pytest
from airflow.sdk._shared.secrets_masker import redact
from airflow.triggers.base import BaseTrigger

from airflow_aip import compat
from tests.fixtures.xcom_rows import push_xcom, xcom_database


@pytest.mark.parametrize("version", ["3.0.6", "2.10.5", "3.0.0rc1"])
def test_a_core_below_the_floor_fails_the_import_naming_the_floor(version: str) -> None:
    with pytest.raises(compat.AirflowTooOld, match=r"apache-airflow>=3\.1") as raised:
        compat.check_floor(version)
    assert version in str(raised.value)
    assert isinstance(raised.value, ImportError)  # what a forced install's import raises


@pytest.mark.parametrize("version", ["3.1.8", "3.2.2", "3.3.2", "3.4.0b2", "4.0.0"])
def test_a_core_at_or_above_the_floor_imports(version: str) -> None:
    compat.check_floor(version)


def test_the_installed_core_is_read_from_its_distribution() -> None:
    import airflow

    assert compat.installed_core() == airflow.__version__
    compat.check_floor()  # this environment's own core is supported


def test_the_trigger_kill_probe_matches_the_core() -> None:
    assert compat.trigger_on_kill() == hasattr(BaseTrigger, "on_kill")


async def test_the_async_mask_teaches_this_process_on_every_core() -> None:
    secret = f"compat-{uuid.uuid4().hex}"
    assert redact(f"v={secret}") == f"v={secret}"
    await compat.async_mask()(secret)
    assert redact(f"v={secret}") == "v=***"


def test_a_deferrable_cancelling_task_is_told_when_a_deferred_kill_cannot_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(compat, "trigger_on_kill", lambda: False)
    (line,) = compat.lacking_lines(deferrable=True, cancel_on_kill=True)
    assert "BaseTrigger.on_kill" in line
    assert "does not cancel" in line
    assert "CancelTrainingJobOperator" in line
    assert compat.lacking_lines(deferrable=False, cancel_on_kill=True) == []
    assert compat.lacking_lines(deferrable=True, cancel_on_kill=False) == []
    monkeypatch.setattr(compat, "trigger_on_kill", lambda: True)
    assert compat.lacking_lines(deferrable=True, cancel_on_kill=True) == []


def test_xcom_set_is_given_only_keywords_this_core_takes() -> None:
    import inspect

    from airflow.models.xcom import XComModel

    assert set(compat.xcom_set_options()) <= set(inspect.signature(XComModel.set).parameters)


def test_an_xcom_is_set_and_deleted_for_one_task_instance_on_every_core() -> None:
    """Through XComModel up to 3.3; from 3.4 in the task try's store, XComModel being a read projection."""
    from datetime import datetime, timezone

    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    at = datetime(2026, 11, 25, tzinfo=timezone.utc)
    with xcom_database() as db:
        for task_id in ("tune", "export"):
            push_xcom(db, "job", task_id, dag_id="d", run_id="r", task_id=task_id, at=at)
        XComModel.set(
            "who",
            {"user": "ada"},
            dag_id="d",
            run_id="r",
            task_id="tune",
            **compat.xcom_set_options(),
            session=db,
        )
        db.commit()
        assert XComModel.deserialize_value(
            db.execute(select(XComModel.value).where(XComModel.key == "who")).one()
        ) == {"user": "ada"}

        compat.delete_xcom(db, dag_id="d", run_id="r", task_id="tune", map_index=-1, key="job")
        db.commit()

        left = db.execute(select(XComModel.task_id, XComModel.key).order_by(XComModel.task_id, XComModel.key))
        assert left.all() == [("export", "job"), ("tune", "who")]
