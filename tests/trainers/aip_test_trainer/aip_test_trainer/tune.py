"""A tuning trial: objective ``-(x - 3)^2 - (y - 0.5)^2 + bonus[kind]``, reported with cloudml-hypertune.

It reports a few intermediate values (so early stopping has something to judge), holds for
``--hold`` seconds so parallel trials overlap, and can fail on purpose with ``--fail-when-x``.
"""

from __future__ import annotations

import os
import sys
import time

import hypertune

from aip_test_trainer.common import environment_report, parser, write_to_job_dir

BONUS = {"good": 1.0, "bad": 0.0}


def main() -> None:
    args = parser()
    args.add_argument("--x", type=float, required=True)
    args.add_argument("--y", type=float, default=0.5)
    args.add_argument("--kind", default="bad")
    args.add_argument("--hold", type=float, default=0.0)
    args.add_argument("--steps", type=int, default=3)
    args.add_argument("--fail-when-x", dest="fail_when_x", type=float, default=None)
    args.add_argument("--metric-tag", dest="metric_tag", default="training/hptuning/metric")
    args.add_argument("--report", action="store_true", help="write report.json to AIP_MODEL_DIR")
    args.add_argument(
        "--also-tag", dest="also_tag", default=None, help="report -objective under this tag too"
    )
    known, _ = args.parse_known_args()
    print(f"trial {os.environ.get('CLOUD_ML_TRIAL_ID')} x={known.x} y={known.y} kind={known.kind}")
    if known.fail_when_x is not None and known.x == known.fail_when_x:
        print(f"refusing x={known.x}", file=sys.stderr)
        sys.exit(2)
    objective = -((known.x - 3) ** 2) - (known.y - 0.5) ** 2 + BONUS.get(known.kind, 0.0)
    tuner = hypertune.HyperTune()
    for step in range(1, known.steps + 1):
        time.sleep(known.hold / known.steps)
        # Intermediate values climb towards the objective, as a real training curve would.
        value = objective - (known.steps - step)
        tuner.report_hyperparameter_tuning_metric(known.metric_tag, value, global_step=step * 100)
    if known.also_tag:
        tuner.report_hyperparameter_tuning_metric(known.also_tag, -objective, global_step=known.steps * 100)
    if known.report:
        write_to_job_dir(os.environ["AIP_MODEL_DIR"], "report.json", environment_report())
    print(f"objective {objective}")


if __name__ == "__main__":
    main()
