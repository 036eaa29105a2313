"""`make ui` and `make demo` keep the local service's ports in its data dir: stored job links keep working."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from scripts.stack import PORTS_FILE, kept_ports, port_is_free


def test_the_ports_chosen_once_are_kept_at_every_start(tmp_path: Path) -> None:
    first = kept_ports(tmp_path)

    assert kept_ports(tmp_path) == first
    assert json.loads((tmp_path / PORTS_FILE).read_text()) == {"service": first[0], "gcs": first[1]}
    assert first[0] != first[1]


def test_a_port_taken_by_something_else_gives_new_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = kept_ports(tmp_path)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", first[0]))
        squatter.listen()
        assert not port_is_free(first[0])
        again = kept_ports(tmp_path)

    assert again[0] != first[0]
    assert kept_ports(tmp_path) == again  # the new ones are kept in turn
    assert "earlier job links will not open" in capsys.readouterr().err


def test_an_unreadable_ports_file_is_replaced(tmp_path: Path) -> None:
    (tmp_path / PORTS_FILE).write_text("{not json")

    ports = kept_ports(tmp_path)

    assert all(port_is_free(port) for port in ports)
    assert json.loads((tmp_path / PORTS_FILE).read_text())["service"] == ports[0]
