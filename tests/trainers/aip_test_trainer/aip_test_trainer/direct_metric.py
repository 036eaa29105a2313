"""A trial that reports its metric the way some trainers and libraries do: by writing Google's default
metric file, ``/tmp/hypertune/output.metrics``, itself, without cloudml-hypertune.

Objective ``-(x - 3)^2``. It holds ``--hold`` seconds between writing and exiting, so parallel
trials overlap (on a shared ``/tmp`` they would read each other's file). ``--report`` writes what
the service gave it to ``AIP_MODEL_DIR/report.json``; ``--fail-trial N`` makes trial N raise
(``always``: any run), with noise on stderr before the traceback.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from aip_test_trainer.common import environment_report, parser, write_to_job_dir

METRIC_FILE = "/tmp/hypertune/output.metrics"


def main() -> None:
    args = parser()
    args.add_argument("--x", type=float, default=0.0)
    args.add_argument("--hold", type=float, default=0.0)
    args.add_argument("--metric-tag", dest="metric_tag", default="training/hptuning/metric")
    args.add_argument("--fail-trial", dest="fail_trial", default=None)
    args.add_argument("--report", action="store_true")
    known, _ = args.parse_known_args()
    trial = os.environ.get("CLOUD_ML_TRIAL_ID")
    if known.fail_trial is not None and known.fail_trial in (trial, "always"):
        print("a warning the message must not carry", file=sys.stderr)
        raise ValueError(f"trial {trial} refuses to train")
    objective = -((known.x - 3) ** 2)
    os.makedirs(os.path.dirname(METRIC_FILE), exist_ok=True)
    with open(METRIC_FILE, "w", encoding="utf-8") as metrics:
        line = {
            "timestamp": time.time(),
            "trial": str(trial),
            known.metric_tag: str(objective),
            "global_step": "7",
        }
        metrics.write(json.dumps(line) + "\n")
    time.sleep(known.hold)
    if known.report:
        report = environment_report(TMPDIR=os.environ.get("TMPDIR"), tempdir=tempfile.gettempdir())
        write_to_job_dir(os.environ["AIP_MODEL_DIR"], "report.json", report)
    print(f"objective {objective}")


if __name__ == "__main__":
    main()
