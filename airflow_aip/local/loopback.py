"""A small server of a job's, on a free loopback port, served by a daemon thread until stopped.

A job's metadata server and its HTTPS proxy live as long as the job's replicas: each is a
``socketserver`` of its own, bound to port 0 on 127.0.0.1 so that many jobs never collide, and
shut down with the job. This is that lifecycle, once.
"""

from __future__ import annotations

import socketserver
import threading
from typing import TypeVar

_Served = TypeVar("_Served", bound="LoopbackServer")


class LoopbackServer:
    """Serves ``server`` (bound already) in a daemon thread from :meth:`start` to :meth:`stop`."""

    def __init__(self, server: socketserver.BaseServer) -> None:
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``."""
        address = self._server.server_address
        assert isinstance(address, tuple)
        return f"{address[0]!s}:{address[1]}"

    def start(self: _Served) -> _Served:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self: _Served) -> _Served:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
