"""Entry point: ``python -m trainer.task --job-dir URI --train-data URI --eval-data URI [--C X ...]``.

It runs the same way on Vertex AI, on AI Platform Training and on the local training service:
- hyperparameters arrive as ``--name=value`` (Vertex AI, AI Platform) or ``--name value``
  arguments; both ``--max-iter`` and ``--max_iter`` are accepted, whichever spelling the tuning
  spec's parameter name uses;
- the eval metric goes to cloudml-hypertune, which writes CLOUD_ML_HP_METRIC_FILE;
- the model (``model.joblib``, the file name AI Platform Prediction loads) and ``metrics.json``
  go to ``AIP_MODEL_DIR`` when Vertex AI sets it (``<base>/model/``, ``<base>/<trial id>/model/``
  for a trial), else under the job dir, or ``<job dir>/<trial id>`` for a tuning trial.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import model, util

MODEL_FILE = "model.joblib"
METRICS_FILE = "metrics.json"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--job-dir",
        "--job_dir",
        dest="job_dir",
        default=os.environ.get("AIP_MODEL_DIR"),
        help="gs:// URI or local path for outputs (default: AIP_MODEL_DIR)",
    )
    parser.add_argument("--train-data", "--train_data", dest="train_data", required=True)
    parser.add_argument("--eval-data", "--eval_data", dest="eval_data", required=True)
    parser.add_argument("--C", "--c", dest="c", type=float, default=1.0, help="inverse regularisation")
    parser.add_argument("--max-iter", "--max_iter", dest="max_iter", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--metric-tag",
        "--metric_tag",
        dest="metric_tag",
        default="accuracy",
        help="must equal the tuning spec's hyperparameterMetricTag",
    )
    args = parser.parse_args(argv)
    if not args.job_dir:
        parser.error("--job-dir is required (or set AIP_MODEL_DIR)")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Train, evaluate, report and save; return what metrics.json holds."""
    pipeline = model.build(args.c, args.max_iter, seed=args.seed)
    x_train, y_train = util.read_csv(args.train_data)
    x_eval, y_eval = util.read_csv(args.eval_data)
    model.train(pipeline, x_train, y_train)
    value = model.accuracy(pipeline, x_eval, y_eval)
    step = model.iterations(pipeline)

    import hypertune

    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag=args.metric_tag, metric_value=value, global_step=step
    )

    out = os.environ.get("AIP_MODEL_DIR") or util.output_dir(args.job_dir)
    metrics = {
        "metric_tag": args.metric_tag,
        "metric_value": value,
        args.metric_tag: value,
        "global_step": step,
        "trial_id": util.trial_id() or None,
        "hyperparameters": {"C": args.c, "max_iter": args.max_iter, "seed": args.seed},
        "train_examples": len(y_train),
        "eval_examples": len(y_eval),
        "model_uri": util.join_uri(out, MODEL_FILE),
    }
    _save_model(pipeline, util.join_uri(out, MODEL_FILE))
    util.write_bytes(
        util.join_uri(out, METRICS_FILE),
        json.dumps(metrics, indent=2, sort_keys=True).encode(),
        content_type="application/json",
    )
    return metrics


def _save_model(pipeline: Any, uri: str) -> None:
    import joblib

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / MODEL_FILE
        joblib.dump(pipeline, path)
        util.write_bytes(uri, path.read_bytes())


def main(argv: Sequence[str] | None = None) -> int:
    metrics = run(parse_args(argv))
    print(f"{metrics['metric_tag']}={metrics['metric_value']:.4f} model={metrics['model_uri']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
