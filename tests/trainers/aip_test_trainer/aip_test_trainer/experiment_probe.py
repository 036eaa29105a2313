"""Logs to a Vertex AI Experiments run from inside a job, as a trainer does on Vertex AI: Google's
SDK with no endpoint of its own (the service redirects it), the run named after the job's own
``CLOUD_ML_JOB_ID`` (a trial's is its own CustomJob's), its arguments as parameters and two
metrics; a tuning trial also reports ``accuracy`` with cloudml-hypertune. What happened goes to
``<job-dir>/experiment.json`` (a trial's: ``experiment-<trial id>.json``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from aip_test_trainer.common import parser, write_to_job_dir


def _log(experiment: str, learning_rate: float) -> dict[str, Any]:
    from google.cloud import aiplatform

    run = f"run-{os.environ['CLOUD_ML_JOB_ID']}"
    aiplatform.init(experiment=experiment)
    aiplatform.start_run(run)
    aiplatform.log_params({"learning_rate": learning_rate, "trial": os.environ.get("CLOUD_ML_TRIAL_ID", "")})
    aiplatform.log_metrics({"accuracy": 1.0 - learning_rate, "loss": learning_rate * 2})
    aiplatform.end_run()
    if os.environ.get("CLOUD_ML_TRIAL_ID"):
        import hypertune

        hypertune.HyperTune().report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="accuracy", metric_value=1.0 - learning_rate
        )
    return {"run": run}


def main() -> None:
    args = parser()
    args.add_argument("--experiment", required=True)
    args.add_argument("--learning_rate", type=float, default=0.1)
    known, _ = args.parse_known_args()
    try:
        report = _log(known.experiment, known.learning_rate)
    except Exception as exc:  # the report says what went wrong; the test reads it
        report = {"error": repr(exc)}
    print(json.dumps(report))
    trial = os.environ.get("CLOUD_ML_TRIAL_ID")
    write_to_job_dir(known.job_dir, f"experiment-{trial}.json" if trial else "experiment.json", report)


if __name__ == "__main__":
    main()
