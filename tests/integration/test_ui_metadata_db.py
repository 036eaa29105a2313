"""`make ui`'s and `make demo`'s metadata DB: the home's own PostgreSQL (scripts/postgres.py, issue 47).

The real Debian PostgreSQL, in a home of the test's own: created once and kept (a second start
finds the same cluster, password and data), password-protected, on 127.0.0.1 only, a fresh
database on demand (``make demo``), and stopped by PID with nothing of it left running. Where
it cannot run (no postgresql; as root, a home nobody can enter) the DB is SQLite, and the
script says so.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import psutil
import pytest
import sqlalchemy
from sqlalchemy.engine import make_url

from scripts.postgres import CLUSTER, PASSWORD, metadata_db, why_not_postgres
from scripts.progress import latest_run_state
from scripts.stack import sqlite_url

pytestmark = pytest.mark.integration


def _postgres_of(home: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if str(home / CLUSTER) in " ".join(p.info["cmdline"] or []):
            found.append(p)
    return found


def _scalar(url: str, query: str) -> object:
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(sqlalchemy.text(query))
            return result.scalar() if result.returns_rows else None
    finally:
        engine.dispose()


def test_the_home_keeps_its_cluster_and_a_stop_leaves_nothing_running(postgres_home: Path) -> None:
    home = postgres_home
    home.mkdir()
    log = home / "ui.log"
    with metadata_db(home, log) as url:
        assert url.startswith("postgresql+psycopg2://airflow:")
        assert make_url(url).host == "127.0.0.1"
        assert _postgres_of(home)
        _scalar(url, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (47)")
        listening = {c.laddr.ip for p in _postgres_of(home) for c in p.net_connections("inet")}
        # the progress reader (make demo) reads through SQLAlchemy: no dag_run table yet is "none"
        assert latest_run_state(url, "aip_training_pipeline") is None
    assert listening == {"127.0.0.1"}
    assert not _postgres_of(home)
    assert "database system is shut down" in log.read_text()  # its fast shutdown, not a SIGKILL
    assert stat.S_IMODE((home / PASSWORD).stat().st_mode) == 0o600

    with metadata_db(home, log) as again:  # the same cluster, password and data
        assert make_url(again).password == make_url(url).password
        assert _scalar(again, "SELECT n FROM kept") == 47
        wrong = make_url(again).set(password="not-the-password").render_as_string(hide_password=False)
        with pytest.raises(sqlalchemy.exc.OperationalError, match="password authentication failed"):
            _scalar(wrong, "SELECT 1")
    with metadata_db(home, log, fresh=True) as fresh:  # make demo: an empty database
        assert _scalar(fresh, "SELECT count(*) FROM pg_tables WHERE tablename = 'kept'") == 0
    assert not _postgres_of(home)


def test_sqlite_where_postgresql_cannot_reach_the_home(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root runs PostgreSQL as nobody")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    home = locked / "home"
    assert why_not_postgres(home) is not None
    with metadata_db(home, home / "ui.log") as url:
        assert url == sqlite_url(home)
    assert "metadata DB is SQLite" in capsys.readouterr().err
