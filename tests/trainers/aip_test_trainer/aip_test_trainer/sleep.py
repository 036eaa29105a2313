"""Runs until stopped (or ``--seconds``), after recording its PID in ``<job-dir>/sleeper.json``."""

from __future__ import annotations

import time

from aip_test_trainer.common import environment_report, parser, write_to_job_dir


def main() -> None:
    args = parser()
    args.add_argument("--seconds", type=float, default=3600.0)
    known, _ = args.parse_known_args()
    if known.job_dir:
        write_to_job_dir(known.job_dir, "sleeper.json", environment_report())
    print("sleeping", flush=True)
    deadline = time.monotonic() + known.seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)
    print("woke up")


if __name__ == "__main__":
    main()
