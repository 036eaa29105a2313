"""Entry point: ``python -m trainer.task --job-dir URI --train-data URI --eval-data URI [--C X ...]``.

With ``--evaluate-model DIR`` it trains nothing: it scores the model saved in ``DIR`` (a
champion's export) on ``--eval-data`` and writes only ``metrics.json`` (to ``--metrics-uri`` when
given), so a champion can be judged on the same rows as a new model.

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
import hashlib
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
    parser.add_argument("--train-data", "--train_data", dest="train_data")
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
    parser.add_argument(
        "--evaluate-model",
        "--evaluate_model",
        dest="evaluate_model",
        help="score the model saved in this directory instead of training one",
    )
    parser.add_argument(
        "--metrics-uri",
        "--metrics_uri",
        dest="metrics_uri",
        help="where metrics.json goes (default: beside the model)",
    )
    args = parser.parse_args(argv)
    if not args.job_dir and not args.metrics_uri:
        parser.error("--job-dir is required (or set AIP_MODEL_DIR)")
    if not args.train_data and not args.evaluate_model:
        parser.error("--train-data is required, unless --evaluate-model scores a saved model")
    return args


def eval_data_record(uri: str, data: bytes) -> dict[str, str]:
    """What the metric was measured on: the CSV's URI and its md5, the fingerprint a gate compares."""
    return {"uri": uri, "md5": hashlib.md5(data).hexdigest()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Train, evaluate, report and save; return what metrics.json holds."""
    eval_bytes = util.read_bytes(args.eval_data)
    x_eval, y_eval = util.csv_to_arrays(eval_bytes)
    if args.evaluate_model:
        return evaluate(args, x_eval, y_eval, eval_data_record(args.eval_data, eval_bytes))
    pipeline = model.build(args.c, args.max_iter, seed=args.seed)
    x_train, y_train = util.read_csv(args.train_data)
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
        "eval_data": eval_data_record(args.eval_data, eval_bytes),
        "model_uri": util.join_uri(out, MODEL_FILE),
    }
    _save_model(pipeline, util.join_uri(out, MODEL_FILE))
    _write_metrics(args.metrics_uri or util.join_uri(out, METRICS_FILE), metrics)
    return metrics


def evaluate(args: argparse.Namespace, x_eval: Any, y_eval: Any, eval_data: dict[str, str]) -> dict[str, Any]:
    """Score a saved model on the eval data: the metric a gate compares with a new model's."""
    saved = _load_model(args.evaluate_model)
    value = model.accuracy(saved, x_eval, y_eval)
    out = os.environ.get("AIP_MODEL_DIR") or util.output_dir(args.job_dir or "")
    metrics = {
        "metric_tag": args.metric_tag,
        "metric_value": value,
        args.metric_tag: value,
        "eval_examples": len(y_eval),
        "eval_data": eval_data,
        "evaluated_model_uri": args.evaluate_model.rstrip("/"),
        "model_uri": None,
    }
    _write_metrics(args.metrics_uri or util.join_uri(out, METRICS_FILE), metrics)
    return metrics


def _load_model(directory: str) -> Any:
    """``directory``'s ``model.joblib``, or its ``model/`` folder's (an ml v1 job's export)."""
    import joblib

    for uri in (util.join_uri(directory, MODEL_FILE), util.join_uri(directory, "model", MODEL_FILE)):
        try:
            data = util.read_bytes(uri)
        except Exception as error:  # google-cloud-storage's NotFound, or a local FileNotFoundError
            if type(error).__name__ in {"NotFound", "FileNotFoundError"}:
                continue
            raise
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / MODEL_FILE
            path.write_bytes(data)
            return joblib.load(path)
    raise FileNotFoundError(f"no {MODEL_FILE} in {directory} or its model/ folder")


def _write_metrics(uri: str, metrics: dict[str, Any]) -> None:
    data = json.dumps(metrics, indent=2, sort_keys=True).encode()
    util.write_bytes(uri, data, content_type="application/json")


def _save_model(pipeline: Any, uri: str) -> None:
    import joblib

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / MODEL_FILE
        joblib.dump(pipeline, path)
        util.write_bytes(uri, path.read_bytes())


def main(argv: Sequence[str] | None = None) -> int:
    metrics = run(parse_args(argv))
    model_uri = metrics["model_uri"] or f"{metrics['evaluated_model_uri']} (evaluated)"
    print(f"{metrics['metric_tag']}={metrics['metric_value']:.4f} model={model_uri}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
