"""Ports for servers that must be told their port before they bind it.

The usual trick, bind port 0, read the port, close, hand it on, has a window: between the close
and the server's own bind, the kernel may give the same port to anyone else who binds port 0 (a
gRPC face, fake-gcs-server) or opens an outgoing connection, since both draw from the ephemeral
range. On a busy machine (tests on four workers, each starting services and replicas) that
happens: a client then meets a stranger on its port (an HTTP/1.1 request answered by HTTP/2
frames).

So ``free_port`` hands out ports from below the ephemeral range, where the kernel never picks on
its own, and remembers for a while, across processes, what it handed out: two callers never get
the same port within ``HELD_SECONDS``, however their binds interleave. Where the ephemeral range
leaves no room below it, it falls back to the kernel's pick.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import socket
import tempfile
import time
from pathlib import Path

HELD_SECONDS = 120.0  # long enough for any server to bind what it was given
LOWEST = 10000  # below: well-known services' usual ports (PostgreSQL, Redis...)
MIN_ROOM = 2000  # fewer free ports below the ephemeral range than this: the kernel picks
_TRIES = 50
_LEDGER = Path(tempfile.gettempdir()) / f"aip-free-ports-{os.getuid()}.json"  # a user's own


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; elsewhere a guess that only narrows the choice


def _binds(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _kernels_pick(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now on ``host`` that no other caller on this machine is given for a while."""
    high = _ephemeral_low() - 1
    if high - LOWEST < MIN_ROOM:
        return _kernels_pick(host)
    with open(_LEDGER, "a+", encoding="utf-8") as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)  # one chooser at a time, machine-wide
        ledger.seek(0)
        try:
            held: dict[str, float] = json.loads(ledger.read() or "{}")
        except ValueError:
            held = {}  # a ledger cut short by a kill: start again
        now = time.time()
        held = {port: since for port, since in held.items() if now - since < HELD_SECONDS}
        for _ in range(_TRIES):
            port = random.randint(LOWEST, high)
            if str(port) not in held and _binds(host, port):
                held[str(port)] = now
                ledger.seek(0)
                ledger.truncate()
                ledger.write(json.dumps(held))
                ledger.flush()
                return port
    return _kernels_pick(host)
