"""What a process replica takes of this machine's environment: its image's variables, and what is passed.

A Vertex AI replica sees its image's environment, Vertex AI's variables and its pool's ``env``
(custom_job.proto ``PythonPackageSpec.env``, ``ContainerSpec.env`` [P]), nothing of the machine
that submitted it. So a process replica starts from an allowlist, never from ``os.environ``: a
``WANDB_API_KEY``, ``HF_TOKEN``, AWS keys, a host tool on ``PATH`` or ``~/.netrc`` of the developer
that works here would fail on Vertex AI. What the image would hold:

- ``PATH``: the runtime's own ``bin`` (the job's environment, as the image's Python is first on its
  ``PATH``), then the system directories of Debian-based images
  (``/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin``, the ``python:3`` images'
  default). [U] the exact ``PATH`` of Google's pre-built images (conda's ``bin`` leads in some).
- ``LANG=C.UTF-8``, as the ``python:3`` and Debian-based images set it; no ``LC_ALL``. [U] Google's
  pre-built images' own value.
- ``TZ=UTC``: a container has no local time zone but UTC, while this machine's ``/etc/localtime``
  would leak through an unset ``TZ``. [U] that Google's images leave the zone at UTC.
- ``HOME``: the replica's own, empty, working directory. Vertex AI runs the image as root with
  ``HOME=/root``, a fresh, empty directory of that container. Locally ``/root`` would be the
  developer's own home when the service runs as root (their ``~/.netrc``, ``~/.aws``, caches
  and tokens) and unwritable when it does not; an empty directory of the replica's own is what
  a trainer finds on Vertex AI, at another path.

The local runtime's own variables (the metadata server, the job's HTTPS proxy and CA bundle, the
Vertex AI SDK's redirection, ``TMPDIR``, the hypertune file, the emulator) are set explicitly by
the runner, never inherited. ``aip-local serve --pass-env NAME`` (or
``AIP_LOCAL_PASS_ENV=NAME,NAME``) passes a variable of this machine on purpose, to process and
container replicas alike: the job's log names each once, and a name not set here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASS_ENV_VARIABLE = "AIP_LOCAL_PASS_ENV"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def image_env(python: Path, home: Path) -> dict[str, str]:
    """The variables a process replica gets as its image would give them (the module's list)."""
    return {
        "PATH": f"{python.parent}:{SYSTEM_PATH}",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "HOME": str(home),
    }


def pass_env_names(flags: Iterable[str] | None, variable: str | None) -> tuple[str, ...]:
    """The names ``--pass-env`` (repeatable, each may be comma-separated) and ``AIP_LOCAL_PASS_ENV``
    give, each once in order; ValueError naming the flag and the rule for a name no variable can have."""
    names: list[str] = []
    for value in [variable or "", *(flags or ())]:
        for name in (part.strip() for part in value.split(",")):
            if not name:
                continue
            if not _NAME.fullmatch(name):
                raise ValueError(
                    f"--pass-env {name!r}: a variable's name is letters, digits and underscores, "
                    "not starting with a digit"
                )
            if name not in names:
                names.append(name)
    return tuple(names)


@dataclass(frozen=True)
class PassedEnv:
    """The host's variables a job's replicas get on purpose, and the named ones this machine lacks."""

    values: Mapping[str, str]
    missing: tuple[str, ...]

    @classmethod
    def of(cls, names: Iterable[str], environ: Mapping[str, str]) -> PassedEnv:
        names = tuple(names)
        return cls(
            {n: environ[n] for n in names if n in environ}, tuple(n for n in names if n not in environ)
        )

    def note(self) -> str:
        """The job's one line on it (names only: a value may be a secret)."""
        if not self.values and not self.missing:
            return (
                "The replicas get no variable of this machine's environment, as on Vertex AI "
                "(aip-local serve --pass-env NAME passes one on purpose)"
            )
        line = "Passed to the replicas from this machine's environment on purpose (--pass-env): "
        line += ", ".join(self.values) or "none"
        if self.missing:
            line += f"; not set on this machine, so not passed: {', '.join(self.missing)}"
        return line
