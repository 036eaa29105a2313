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

from collections.abc import Callable
from pathlib import Path

from airflow_aip.local.egress.tunnel import Front, TrainerProxy, VertexFaces

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
    ) -> None:
        """``faces``: the service's gRPC and REST addresses, in clear (None: Vertex AI's names are
        refused, as are Google's others)."""
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
