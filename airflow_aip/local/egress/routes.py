"""Where a replica's HTTPS goes: Google's storage hosts to the emulator, Google's others nowhere.

On Vertex AI a replica reaches Google's APIs with its job's rights and the internet as any VM
does. Locally the job's rights are a token only the local services accept, so:

- ``storage.googleapis.com`` and ``www.googleapis.com`` (Cloud Storage's JSON, upload and public
  object hosts, the ones TensorFlow's ``gs://`` names) end at the service's front to the Cloud
  Storage emulator (:mod:`.front`);
- Vertex AI's hosts (``aiplatform.googleapis.com``, ``{region}-aiplatform.googleapis.com``) on
  443 end at the local service itself: a trainer's own gapic (gRPC) or REST clients reach it;
- every other Google API host, and Google's sign-in, is refused: a call there would act with
  nobody's rights, or this machine's user's, so it fails at once, naming the host;
- any other host is tunnelled untouched (datasets, package indexes), as a Vertex VM reaches it.
"""

from __future__ import annotations

import enum

STORAGE_HOSTS = frozenset({"storage.googleapis.com", "www.googleapis.com"})
_REFUSED_SUFFIXES = (".googleapis.com", ".googleusercontent.com", ".google.internal")
_REFUSED = frozenset({"googleapis.com", "accounts.google.com", "oauth2.googleapis.com", "169.254.169.254"})


class Way(enum.Enum):
    FRONT = "front"
    VERTEX = "vertex"
    REFUSE = "refuse"
    TUNNEL = "tunnel"


def is_vertex_host(name: str) -> bool:
    """``aiplatform.googleapis.com`` or a regional ``{region}-aiplatform.googleapis.com``."""
    if name == "aiplatform.googleapis.com":
        return True
    region = name.removesuffix("-aiplatform.googleapis.com")
    return region != name and bool(region) and "." not in region


def way_of(host: str, port: int) -> tuple[Way, str]:
    """Where a ``CONNECT host:port`` goes, and why (the reason phrase of a refusal)."""
    name = host.lower().rstrip(".").strip("[]")
    if name in STORAGE_HOSTS and port == 443:
        return Way.FRONT, "Cloud Storage: the local emulator"
    if is_vertex_host(name) and port == 443:
        return Way.VERTEX, "Vertex AI: the local service"
    if name in _REFUSED or name.endswith(_REFUSED_SUFFIXES):
        if name.endswith("aiplatform.googleapis.com"):
            why = "Vertex AI is served on port 443 of its API hosts, by the local service"
        elif name.endswith(".google.internal") or name == "169.254.169.254":
            why = "the job's metadata server is at GCE_METADATA_HOST"
        else:
            why = "a trainer's calls to Google stay on this machine"
        return Way.REFUSE, f"aip-local refuses {name}: {why}"
    return Way.TUNNEL, "not Google's"
