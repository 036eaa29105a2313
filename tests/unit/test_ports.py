"""Ports handed out before their server binds them never meet a stranger; a busy ``--port`` is
refused before ``aip-local serve`` starts anything."""

from __future__ import annotations

import multiprocessing
import socket
from pathlib import Path

import pytest

from airflow_aip.local import cli, ports


def _ports_of_a_process(count: int) -> list[int]:
    return [ports.free_port() for _ in range(count)]


def test_free_ports_come_from_below_the_ephemeral_range_where_the_kernel_never_picks() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    handed = [ports.free_port() for _ in range(20)]
    assert all(ports.LOWEST <= port < low for port in handed), handed
    with socket.socket() as sock:  # what bind(0) and outgoing connections draw from
        sock.bind(("127.0.0.1", 0))
        assert sock.getsockname()[1] >= low


def test_no_two_processes_are_given_the_same_port_while_it_is_held() -> None:
    # Four processes at once, as four xdist workers start their services: 4 x 150 ports, in a
    # range of some 22,000 a plain random pick would repeat one of with a chance near 1 - e^-8.
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        handed = [port for batch in pool.map(_ports_of_a_process, [150] * 4) for port in batch]
    assert len(set(handed)) == len(handed)


def test_a_port_already_listening_is_never_handed_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ports, "_LEDGER", tmp_path / "ledger.json")  # nothing held yet
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports.LOWEST))
        busy.listen()
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: ports.LOWEST + ports.MIN_ROOM + 1)
        picks = iter([ports.LOWEST, ports.LOWEST, ports.LOWEST + 1])
        monkeypatch.setattr("random.randint", lambda low, high: next(picks))
        assert ports.free_port() == ports.LOWEST + 1


def test_serve_on_a_busy_port_refuses_before_it_starts_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert cli.main(["serve", "--data-dir", str(data_dir), "--port", str(port), "--gcs-port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port} (--port)" in err
    assert not data_dir.exists()  # no fake-gcs-server, no store, no job runner
