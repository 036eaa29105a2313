"""Data and storage helpers for the iris trainer, also used by the example DAGs' "prepare data" step.

Only the standard library is imported at module level: a DAG task may import this module, and
numpy, scikit-learn and google-cloud-storage stay out of DAG parsing until a function needs them.
Paths are ``gs://bucket/object`` URIs or local paths, so the same code runs on AI Platform, on the
local training service (whose STORAGE_EMULATOR_HOST points google-cloud-storage at an emulator)
and on a laptop.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FEATURES = ("sepal_length_cm", "sepal_width_cm", "petal_length_cm", "petal_width_cm")
LABEL = "species"
COLUMNS = (*FEATURES, LABEL)

Row = list[float]


def load_split(seed: int = 0, eval_fraction: float = 0.2) -> tuple[list[Row], list[Row]]:
    """The iris data as ``(train_rows, eval_rows)``, split stratified and deterministic.

    Each row is the four features followed by the integer class label (0, 1 or 2). The same
    ``seed`` always gives the same split, so a retraining run can be compared with the last one.
    Plain Python over the CSV scikit-learn ships: importing scikit-learn costs a DAG's
    "prepare data" task seconds on a small machine, and 150 rows need none of it.
    """
    if not 0.0 < eval_fraction < 1.0:
        raise ValueError(f"eval_fraction must be strictly between 0 and 1, got {eval_fraction!r}")
    rows = _iris_rows()
    by_class: dict[int, list[Row]] = {}
    for row in rows:
        by_class.setdefault(int(row[-1]), []).append(row)
    wanted = _per_class(
        {label: len(members) for label, members in by_class.items()}, math.ceil(eval_fraction * len(rows))
    )
    rng = random.Random(seed)
    train: list[Row] = []
    evaluation: list[Row] = []
    for label in sorted(by_class):
        members = list(by_class[label])
        rng.shuffle(members)
        evaluation += members[: wanted[label]]
        train += members[wanted[label] :]
    rng.shuffle(train)
    rng.shuffle(evaluation)
    return train, evaluation


def _per_class(sizes: dict[int, int], total: int) -> dict[int, int]:
    """``total`` eval rows shared among the classes in proportion to their sizes (largest remainder)."""
    count = sum(sizes.values())
    exact = {label: total * size / count for label, size in sizes.items()}
    chosen = {label: math.floor(share) for label, share in exact.items()}
    by_remainder = sorted(exact, key=lambda label: (chosen[label] - exact[label], label))
    for label in by_remainder[: total - sum(chosen.values())]:
        chosen[label] += 1
    return chosen


def _iris_rows() -> list[Row]:
    """The 150 iris rows from scikit-learn's bundled ``iris.csv``, found without importing sklearn."""
    spec = importlib.util.find_spec("sklearn")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / "datasets" / "data" / "iris.csv"
        if path.is_file():
            rows: list[Row] = []
            for line in path.read_text().splitlines()[1:]:  # the header line holds counts and names
                if line:
                    *features, label = line.split(",")
                    rows.append([float(v) for v in features] + [int(label)])
            return rows
    from sklearn.datasets import load_iris  # a layout we do not know: the slow, sure way

    features, labels = load_iris(return_X_y=True)
    return [[float(v) for v in x] + [int(y)] for x, y in zip(features, labels, strict=True)]


def rows_to_csv(rows: Sequence[Sequence[float]]) -> bytes:
    """CSV bytes with a header line naming the columns."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    return buffer.getvalue().encode()


def csv_to_arrays(data: bytes) -> tuple[Any, Any]:
    """``(features, labels)`` numpy arrays from CSV bytes written by :func:`rows_to_csv`."""
    import numpy as np

    reader = csv.reader(io.StringIO(data.decode()))
    header = next(reader, None)
    if header is None or tuple(header) != COLUMNS:
        raise ValueError(f"expected a CSV header {','.join(COLUMNS)!r}, got {header!r}")
    rows = [[float(value) for value in row] for row in reader if row]
    if not rows:
        raise ValueError("the CSV holds no rows")
    table = np.asarray(rows, dtype=float)
    return table[:, :-1], table[:, -1].astype(int)


def write_csv(rows: Sequence[Sequence[float]], uri: str) -> str:
    """Write rows as CSV to a gs:// URI or a local path; return the URI."""
    write_bytes(uri, rows_to_csv(rows), content_type="text/csv")
    return uri


def read_csv(uri: str) -> tuple[Any, Any]:
    """``(features, labels)`` from a CSV at a gs:// URI or a local path."""
    return csv_to_arrays(read_bytes(uri))


def split_gcs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` -> ``("bucket", "a/b")``."""
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    if not uri.startswith("gs://") or not bucket:
        raise ValueError(f"not a gs:// URI: {uri!r}")
    return bucket, name


def storage_client() -> Any:
    """A google-cloud-storage client; anonymous when STORAGE_EMULATOR_HOST names an emulator."""
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        project = os.environ.get("CLOUD_ML_PROJECT_ID") or "local-project"
        return storage.Client(project=project, credentials=AnonymousCredentials())
    return storage.Client(project=os.environ.get("CLOUD_ML_PROJECT_ID") or None)


def read_bytes(uri: str) -> bytes:
    if uri.startswith("gs://"):
        bucket, name = split_gcs_uri(uri)
        return bytes(storage_client().bucket(bucket).blob(name).download_as_bytes())
    return Path(uri).read_bytes()


def write_bytes(uri: str, data: bytes, content_type: str = "application/octet-stream") -> None:
    if uri.startswith("gs://"):
        bucket, name = split_gcs_uri(uri)
        storage_client().bucket(bucket).blob(name).upload_from_string(data, content_type=content_type)
        return
    path = Path(uri)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def join_uri(base: str, *parts: str) -> str:
    """Join path parts onto a gs:// URI or a local path, ignoring empty parts."""
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts if p)])


def trial_id() -> str:
    """The hyperparameter-tuning trial this process runs, or "" outside tuning.

    AI Platform sets CLOUD_ML_TRIAL_ID and TF_CONFIG's ``task.trial``; Google's samples append it to
    the output path so that parallel trials never overwrite each other's model.
    """
    trial = os.environ.get("CLOUD_ML_TRIAL_ID", "")
    if trial:
        return trial
    try:
        task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
    except (json.JSONDecodeError, AttributeError):
        return ""
    return str(task.get("trial") or "")


def output_dir(job_dir: str) -> str:
    """Where this run writes its model: the job dir, or ``<job dir>/<trial id>`` in a tuning trial."""
    return join_uri(job_dir, trial_id())
