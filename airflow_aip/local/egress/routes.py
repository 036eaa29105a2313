"""Where a replica's HTTPS goes: Google's storage hosts to the emulator, Google's others nowhere
unless named.

On Vertex AI a replica reaches Google's APIs with its job's rights and the internet as any VM
does. Locally the job's rights are a token only the local services accept, so:

- ``storage.googleapis.com`` and ``www.googleapis.com`` (Cloud Storage's JSON, upload and public
  object hosts, the ones TensorFlow's ``gs://`` names) end at the service's front to the Cloud
  Storage emulator (:mod:`.front`);
- Vertex AI's hosts (``aiplatform.googleapis.com``, ``{region}-aiplatform.googleapis.com``) on
  443 end at the local service itself: a trainer's own gapic (gRPC) or REST clients reach it;
- a Google API host named by ``aip-local serve --pass-through-host`` goes to Google with the
  developer's own credentials (:mod:`.passthrough`), each request told to the job's log;
- every other Google API host, and Google's sign-in, is refused: a call there would act with
  nobody's rights, or this machine's user's, so it fails at once, naming the host and the flag
  that would pass it;
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
    PASS = "pass"  # to Google, with the developer's credentials (.passthrough)


PASS_FLAG = "--pass-through-host"
# Hosts that can never be passed: the ones answered here, and Google's sign-in (a trainer's token
# requests must stay local, or its local token would be traded for a real one).
_NEVER_PASSED = STORAGE_HOSTS | {"googleapis.com", "oauth2.googleapis.com", "accounts.google.com"}


def is_vertex_host(name: str) -> bool:
    """``aiplatform.googleapis.com`` or a regional ``{region}-aiplatform.googleapis.com``."""
    if name == "aiplatform.googleapis.com":
        return True
    region = name.removesuffix("-aiplatform.googleapis.com")
    return region != name and bool(region) and "." not in region


def pass_through_refusal(host: str) -> str | None:
    """Why ``host`` cannot be named by :data:`PASS_FLAG` (None: it can): only Google's own API hosts
    (``*.googleapis.com``) that are not answered on this machine."""
    name = host.lower().rstrip(".")
    if not name.endswith(".googleapis.com") or not name.removesuffix(".googleapis.com"):
        return f"{PASS_FLAG} {host}: only Google API hosts (*.googleapis.com) are passed through"
    if name in _NEVER_PASSED or is_vertex_host(name):
        return f"{PASS_FLAG} {host}: this host is answered on this machine, never passed to Google"
    return None


def way_of(
    host: str, port: int, passed: frozenset[str] = frozenset(), *, trainer: bool = True
) -> tuple[Way, str]:
    """Where a ``CONNECT host:port`` goes, and why (the reason phrase of a refusal); ``passed``: the
    hosts named by :data:`PASS_FLAG`; ``trainer``: a job's proxy asks (a refusal then names the flag,
    which passes a trainer's calls only)."""
    name = host.lower().rstrip(".").strip("[]")
    if name in passed and port == 443:
        return Way.PASS, "Google, with the developer's credentials"
    if name in STORAGE_HOSTS and port == 443:
        return Way.FRONT, "Cloud Storage: the local emulator"
    if is_vertex_host(name) and port == 443:
        return Way.VERTEX, "Vertex AI: the local service"
    if name in _REFUSED or name.endswith(_REFUSED_SUFFIXES):
        if name.endswith("aiplatform.googleapis.com"):
            why = "Vertex AI is served on port 443 of its API hosts, by the local service"
        elif name.endswith(".google.internal") or name == "169.254.169.254":
            why = "the job's metadata server is at GCE_METADATA_HOST"
        elif trainer and pass_through_refusal(name) is None:
            why = (
                "a trainer's calls to Google stay on this machine "
                f"(aip-local serve {PASS_FLAG} {name} passes them with your own credentials)"
            )
        else:
            why = "a trainer's calls to Google stay on this machine"
        return Way.REFUSE, f"aip-local refuses {name}: {why}"
    return Way.TUNNEL, "not Google's"
