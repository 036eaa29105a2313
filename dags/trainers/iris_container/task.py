"""The iris trainer of the container example: softmax regression in plain Python, tuned by hypertune.

``python3 task.py --train-data gs://... --eval-data gs://... [--learning-rate X] [--epochs N]``

Only the standard library and cloudml-hypertune, so the image builds in seconds from any Python
base. Cloud Storage is reached as on any Google Cloud VM: a token from the metadata server, then
Cloud Storage's JSON API at storage.googleapis.com. The local training service gives each
replica the same two (a metadata server and an HTTPS proxy to its Cloud Storage emulator).

Output: ``model.json`` (the weights) and ``metrics.json`` in ``AIP_MODEL_DIR`` (Vertex AI), else
``<--job-dir>/<trial id>`` (AI Platform), where the export operator looks for them.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

STORAGE = "https://storage.googleapis.com"
Rows = list[list[float]]


def token() -> str:
    """An access token of the VM's service account, from the metadata server."""
    host = os.environ.get("GCE_METADATA_HOST", "metadata.google.internal")
    url = f"http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({})
    )  # the metadata server: never proxied
    with opener.open(request, timeout=30) as answer:
        return str(json.load(answer)["access_token"])


def _split(uri: str) -> tuple[str, str]:
    if not uri.startswith("gs://"):
        raise ValueError(f"not a gs:// URI: {uri!r}")
    bucket, _, name = uri[len("gs://") :].partition("/")
    return bucket, name


def read(uri: str) -> bytes:
    bucket, name = _split(uri)
    url = f"{STORAGE}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token()}"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return bytes(answer.read())


def write(uri: str, data: bytes, content_type: str = "application/json") -> None:
    bucket, name = _split(uri)
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    headers = {"Authorization": f"Bearer {token()}", "Content-Type": content_type}
    request = urllib.request.Request(f"{STORAGE}/upload/storage/v1/b/{bucket}/o?{query}", data, headers)
    with urllib.request.urlopen(request, timeout=60):
        pass


def load(uri: str) -> tuple[Rows, list[int]]:
    """Features and labels of a CSV written by the example's prepare_data (four features, then label)."""
    reader = csv.reader(io.StringIO(read(uri).decode()))
    next(reader)
    rows = [[float(value) for value in line] for line in reader if line]
    return [row[:-1] for row in rows], [int(row[-1]) for row in rows]


def standardise(train: Rows, other: Rows) -> tuple[Rows, Rows]:
    columns = list(zip(*train, strict=True))
    means = [sum(c) / len(c) for c in columns]
    spreads = [
        math.sqrt(sum((v - m) ** 2 for v in c) / len(c)) or 1.0 for c, m in zip(columns, means, strict=True)
    ]

    def scale(rows: Rows) -> Rows:
        return [[(v - m) / s for v, m, s in zip(row, means, spreads, strict=True)] for row in rows]

    return scale(train), scale(other)


def probabilities(weights: Rows, row: list[float]) -> list[float]:
    scores = [w[0] + sum(wi * xi for wi, xi in zip(w[1:], row, strict=True)) for w in weights]
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    return [e / sum(exps) for e in exps]


def fit(features: Rows, labels: list[int], learning_rate: float, epochs: int) -> Rows:
    """Full-batch gradient descent on the cross-entropy: few epochs or a tiny rate underfit."""
    classes, width = max(labels) + 1, len(features[0]) + 1
    weights = [[0.0] * width for _ in range(classes)]
    for _ in range(epochs):
        gradient = [[0.0] * width for _ in range(classes)]
        for row, label in zip(features, labels, strict=True):
            for k, p in enumerate(probabilities(weights, row)):
                error = p - (1.0 if k == label else 0.0)
                gradient[k][0] += error
                for j, x in enumerate(row, start=1):
                    gradient[k][j] += error * x
        for k in range(classes):
            for j in range(width):
                weights[k][j] -= learning_rate * gradient[k][j] / len(features)
    return weights


def accuracy(weights: Rows, features: Rows, labels: list[int]) -> float:
    right = 0
    for row, label in zip(features, labels, strict=True):
        chances = probabilities(weights, row)
        right += chances.index(max(chances)) == label
    return right / len(labels)


def output_dir(job_dir: str) -> str:
    if os.environ.get("AIP_MODEL_DIR"):
        return os.environ["AIP_MODEL_DIR"].rstrip("/")
    if not job_dir:
        raise ValueError("no AIP_MODEL_DIR and no --job-dir: nowhere to write the model")
    trial = os.environ.get("CLOUD_ML_TRIAL_ID", "")
    return f"{job_dir.rstrip('/')}/{trial}" if trial else job_dir.rstrip("/")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-data", required=True)
    parser.add_argument("--eval-data", required=True)
    parser.add_argument("--learning-rate", "--learning_rate", type=float, default=0.5)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--metric-tag", default="accuracy")
    parser.add_argument("--job-dir", "--job_dir", default="")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.learning_rate <= 0 or args.epochs < 1:
        raise ValueError(
            f"learning rate must be > 0 and epochs >= 1; got {args.learning_rate}, {args.epochs}"
        )
    x_train, y_train = load(args.train_data)
    x_eval, y_eval = load(args.eval_data)
    x_train, x_eval = standardise(x_train, x_eval)
    weights = fit(x_train, y_train, args.learning_rate, args.epochs)
    value = accuracy(weights, x_eval, y_eval)

    import hypertune

    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag=args.metric_tag, metric_value=value, global_step=args.epochs
    )
    out = output_dir(args.job_dir)
    hyperparameters: dict[str, Any] = {"learning_rate": args.learning_rate, "epochs": args.epochs}
    metrics = {"metric_tag": args.metric_tag, args.metric_tag: value, "hyperparameters": hyperparameters}
    write(f"{out}/model.json", json.dumps({"weights": weights, **hyperparameters}).encode())
    write(f"{out}/metrics.json", json.dumps(metrics, indent=2).encode())
    print(f"{args.metric_tag}={value:.4f} model={out}/model.json", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
