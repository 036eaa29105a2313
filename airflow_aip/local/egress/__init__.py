"""A replica's HTTPS: Google's storage hosts end at the emulator, Vertex AI's at the service, Google's
others are refused.

google-cloud-storage, gcsfs and ``/gcs/`` find the emulator through ``STORAGE_EMULATOR_HOST``;
TensorFlow's ``gs://`` and any client with Google's names built in do not. :class:`TrainerEgress`
gives a job's replicas an HTTPS proxy (:mod:`.tunnel`) and a CA bundle (:mod:`.authority`), so
those names end at a front to the emulator (:mod:`.front`), Vertex AI's at the service's gRPC or
REST face (a trainer's own gapic clients), other Google hosts are refused (:mod:`.routes`) and
every other host is reached as from a Vertex VM. The client proxy for Google's clients outside
any job (Airflow's processes, ``aip-local env``) is :mod:`.clients`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_aip.local.egress.tunnel import Front, Passing, TrainerProxy, VertexFaces

if TYPE_CHECKING:  # its servers (uvicorn, httpx) load only when a host is passed
    from airflow_aip.local.egress.passthrough import PassThrough

# Loopback is never proxied: the emulator, the metadata server and the service are reached directly.
NO_PROXY = "127.0.0.1,localhost,::1"
# Where nothing listens (discard, closed on loopback): Google's storage hosts when the service
# runs without an emulator, so such a call fails at once.
_NOWHERE = ("127.0.0.1", 9)


class TrainerEgress:
    """One job's proxy, with the front to ``storage_url`` (started once per process, its files in
    ``directory``: the service's data dir, so nothing is left in ``/tmp`` by a killed service)."""

    def __init__(
        self,
        storage_url: str | None,
        directory: Path,
        on_refusal: Callable[[str, str], None],
        faces: tuple[tuple[str, int], tuple[str, int]] | None = None,
        passing: PassThrough | None = None,
        on_pass: Callable[[str, str], None] = lambda host, request: None,
    ) -> None:
        """``faces``: the service's gRPC and REST addresses, in clear (None: Vertex AI's names are
        refused, as are Google's others); ``passing``: the Google hosts passed to Google with the
        developer's credentials (:mod:`.passthrough`), each request told to ``on_pass``."""
        vertex = None
        if faces is not None:
            from airflow_aip.local.egress.clients import server_tls

            tls, bundle = server_tls(directory)
            vertex = VertexFaces(tls, *faces)
        if storage_url:
            from airflow_aip.local.egress.front import storage_front

            server = storage_front(storage_url, directory)
            self.bundle: str = str(server.bundle)
            front = Front(server.address, server.tls, vertex)
        else:
            self.bundle = str(bundle) if vertex is not None else ""
            front = Front(_NOWHERE, None, vertex)
        if passing is not None and passing.hosts:
            front = dataclasses.replace(front, passing=_passing(passing, directory, on_pass))
            self.bundle = self.bundle or str(directory / "ca-bundle.pem")
        self._proxy = TrainerProxy(front, on_refusal)

    def env(self) -> tuple[tuple[str, str], ...]:
        """The proxy in the names clients read (libcurl: lower case first), and the bundle."""
        url = self._proxy.url
        proxy = (("https_proxy", url), ("HTTPS_PROXY", url), ("no_proxy", NO_PROXY), ("NO_PROXY", NO_PROXY))
        if not self.bundle:
            return proxy
        trust = ("CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH")
        return (*proxy, *((name, self.bundle) for name in trust))

    def start(self) -> TrainerEgress:
        self._proxy.start()
        return self

    def stop(self) -> None:
        self._proxy.stop()


def _passing(passing: PassThrough, directory: Path, on_pass: Callable[[str, str], None]) -> Passing:
    from airflow_aip.local.egress.passthrough import pass_through_server

    server = pass_through_server(passing, directory)
    return Passing(passing.hosts, server.address, server.tls, on_pass)
