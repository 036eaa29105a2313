"""Where a task's Cloud Storage data is: dataset names for gs:// URIs, found in args and job specs.

Pure (neither OpenLineage nor Airflow), so the rules are tested without the provider. Names follow
OpenLineage's naming spec (``openlineage.client.naming.dataset``): Cloud Storage is namespace
``gs://{bucket}``, name the object path without a trailing slash (``/`` for a bucket root; a
wildcard stands for its folder), as the Google provider's ``extract_ds_name_from_gcs_path`` names
them, so our datasets join theirs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["gcs_dataset_id", "gcs_uris_in_args", "is_below", "staged_sha256", "values_under"]

_SHA256 = re.compile(r"[0-9a-f]{64}")
# Flags whose gs:// value the trainer writes to: outputs, never inputs.
_OUTPUT_FLAGS = frozenset({"--job-dir", "--job_dir"})


def gcs_dataset_id(uri: Any) -> tuple[str, str] | None:
    """``gs://b/a/c/`` -> ``("gs://b", "a/c")``; ``gs://b`` -> ``("gs://b", "/")``; else None.

    A wildcard (``gs://b/data/part-*``) names its folder (``data``): the files it matches are
    decided when they are read, the folder is what a lineage graph can join on.
    """
    if not isinstance(uri, str) or not uri.startswith("gs://"):
        return None
    bucket, _, path = uri[len("gs://") :].partition("/")
    if not bucket:
        return None
    if "*" in path:
        path = path.split("*", 1)[0].rpartition("/")[0]
    return f"gs://{bucket}", path.strip("/") or "/"


def gcs_uris_in_args(args: Any, exclude_under: str | None = None) -> list[str]:
    """The gs:// values in a trainer's args, in order, once each: what the job reads.

    Values of ``--flag gs://...``, ``--flag=gs://...``, bare positional URIs and comma-separated
    lists of them. ``--job-dir`` and anything below ``exclude_under`` (the job's output
    directory) are what the job writes, not inputs.
    """
    below = exclude_under.rstrip("/") + "/" if exclude_under else None
    found: list[str] = []
    for flag, value in _flag_values(args):
        if flag in _OUTPUT_FLAGS:
            continue
        for uri in value.split(","):
            uri = uri.strip()
            if uri.startswith("gs://") and uri not in found and not is_below(uri, below):
                found.append(uri)
    return found


def _flag_values(args: Any) -> Iterator[tuple[str | None, str]]:
    """``(flag, value)`` of each value in an args list; the flag is None for a positional value."""
    if not isinstance(args, list | tuple):
        return
    flag: str | None = None
    for token in (str(a) for a in args if isinstance(a, str | int | float)):
        if token.startswith("-") and "=" in token:
            name, _, value = token.partition("=")
            yield name, value
            flag = None
        elif token.startswith("-"):
            flag = token
        else:
            yield flag, token
            flag = None


def is_below(uri: str, prefix: str | None) -> bool:
    """Whether ``uri`` is ``prefix`` (a folder ending in ``/``) or lies in it; never for None."""
    return prefix is not None and (uri.rstrip("/") + "/").startswith(prefix)


def values_under(spec: Any, key: str) -> list[str]:
    """Every string in a list under ``key``, at any depth of a job spec: ``args``, ``packageUris``.

    One walk reads ml v1's ``trainingInput`` and every Vertex AI worker pool's
    ``pythonPackageSpec`` alike.
    """
    found: list[str] = []
    if isinstance(spec, Mapping):
        for name, value in spec.items():
            if name == key and isinstance(value, list | tuple):
                found.extend(str(v) for v in value if isinstance(v, str | int | float))
            else:
                found.extend(values_under(value, key))
    elif isinstance(spec, list | tuple):
        for item in spec:
            found.extend(values_under(item, key))
    return found


def staged_sha256(uri: Any) -> str | None:
    """The sha256 a content-addressed staged URI carries: ``{staging}/{sha256}/{basename}``."""
    if not isinstance(uri, str):
        return None
    parts = uri.rstrip("/").split("/")
    return parts[-2] if len(parts) >= 2 and _SHA256.fullmatch(parts[-2]) else None
