"""A trainer's own Google I/O, as on Vertex AI: credentials, its Vertex AI calls, and nothing to Google.

On Vertex a replica finds its Application Default Credentials at the VM's metadata server, and
its Vertex AI and Cloud Storage calls reach Google with them. Locally, for as long as a job runs,
:class:`TrainerIO` serves it:

- a metadata server on loopback (:mod:`airflow_aip.local.metadata_server`) answering the job's
  project, its service account and a token the local services accept; each replica gets
  ``GCE_METADATA_HOST`` and ``GCE_METADATA_IP`` (google-auth reads both, TensorFlow's ``gs://``
  the first) and ``NO_GCE_CHECK=false``. ``CLOUDSDK_CONFIG`` names an empty directory of the job's,
  so the ADC file of this machine's user (``gcloud auth application-default login``) is not
  found first, as no such file exists on a Vertex VM; the runner does not pass on
  ``GOOGLE_APPLICATION_CREDENTIALS`` or ``GCLOUD_PROJECT`` either (a pool's ``env`` may still
  set them, as on Vertex);
- the Vertex AI SDK pointed at the local service (:mod:`airflow_aip.local.trainer_site`): its
  directory first on ``PYTHONPATH``, the service's URL in ``AIP_LOCAL_AIPLATFORM_ENDPOINT`` and
  the project ID in ``AIP_LOCAL_PROJECT_ID``;
- Cloud Storage through google-cloud-storage and gcsfs reaches the emulator through
  ``STORAGE_EMULATOR_HOST`` (set by the runner), and ``/gcs/`` through :mod:`.gcs_mount`;
- everything else that names Google's hosts itself (TensorFlow's ``gs://``, curl, gsutil) goes
  through the job's HTTPS proxy (:mod:`airflow_aip.local.egress`): Cloud Storage's hosts end at
  the emulator, the hosts named by ``--pass-through-host`` go to Google with the developer's
  credentials (:mod:`airflow_aip.local.egress.passthrough`; the job's log names each request),
  other Google hosts are refused (the job's log names each), other hosts are reached as from a
  Vertex VM.

Nothing a trainer does reaches Google with anyone's rights unless the developer named the host:
its token is refused there, this machine's user's credentials are not found, and Google's other
API hosts are not reached at all.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from airflow_aip.local import trainer_site
from airflow_aip.local.egress import TrainerEgress
from airflow_aip.local.executor.plans import ExecutionPlan
from airflow_aip.local.metadata_server import MetadataServer, TrainerIdentity
from airflow_aip.local.trainer_site.sitecustomize import ENDPOINT_VARIABLE, PROJECT_VARIABLE

if TYPE_CHECKING:
    from airflow_aip.local.egress.passthrough import PassThrough

SITE_DIR = Path(trainer_site.__file__).resolve().parent
# Where the SDK goes when the service does not know its own URL: nowhere (port 9 is discard,
# closed on loopback), so a call fails at once instead of reaching Google.
_NO_ENDPOINT = "http://127.0.0.1:9"


def identity_of(plan: ExecutionPlan) -> TrainerIdentity:
    return TrainerIdentity(plan.project_id, plan.project_number, plan.service_account, plan.region)


@dataclass
class TrainerIO:
    """The job's metadata server and HTTPS proxy, started on entry and stopped on exit, and its
    replicas' variables. ``on_refusal(host, why)`` hears of each Google host a replica was refused."""

    plan: ExecutionPlan
    job_dir: Path
    service_url: str = ""
    storage_url: str | None = None
    on_refusal: Callable[[str, str], None] = lambda host, why: None
    egress_dir: Path | None = None  # the service's: its CA bundle for replicas (default: beside the job's)
    grpc_address: str = ""  # the service's gRPC face in clear, ``host:port`` ("": none)
    passing: PassThrough | None = None  # Google hosts passed to Google (--pass-through-host)
    on_pass: Callable[[str, str], None] = lambda host, request: None  # each passed request

    def __post_init__(self) -> None:
        self._metadata = MetadataServer(identity_of(self.plan))
        directory = self.egress_dir or self.job_dir.parent / "egress"
        self._egress = TrainerEgress(
            self.storage_url, directory, self.on_refusal, self._faces(), self.passing, self.on_pass
        )

    def _faces(self) -> tuple[tuple[str, int], tuple[str, int]] | None:
        """Where a replica's calls to Vertex AI's names go: the service's gRPC and REST faces."""
        rest = urllib.parse.urlsplit(self.service_url)
        host, _, port = self.grpc_address.rpartition(":")
        if not (host and port.isdigit() and rest.hostname and rest.port):
            return None
        return (host, int(port)), (rest.hostname, rest.port)

    def env(self) -> tuple[tuple[str, str], ...]:
        """What every replica's environment gets (before the pool's own ``env``)."""
        gcloud = self.job_dir / "gcloud"
        gcloud.mkdir(parents=True, exist_ok=True)
        host = self._metadata.host
        return (
            ("GCE_METADATA_HOST", host),
            ("GCE_METADATA_IP", host),
            ("NO_GCE_CHECK", "false"),
            ("CLOUDSDK_CONFIG", str(gcloud)),
            ("PYTHONPATH", str(SITE_DIR)),
            (ENDPOINT_VARIABLE, self.service_url.rstrip("/") or _NO_ENDPOINT),
            (PROJECT_VARIABLE, self.plan.project_id),
            *self._egress.env(),
        )

    def __enter__(self) -> TrainerIO:
        self._metadata.start()
        self._egress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._metadata.stop()
        self._egress.stop()
