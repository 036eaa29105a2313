"""Prints known numbered lines, for the log-streaming tests.

``--lines N`` lines ``chatty line 0001`` ... spread over ``--seconds``, then a last burst of
``--last-burst`` lines within the final second before exit (the lines a streamer that stops at
the job's end would miss). ``--flood N`` prints ``flood line 000001`` ... as fast as it can.
``--fail`` exits with code 1 after printing, so the last lines explain a failure.
"""

from __future__ import annotations

import sys
import time

from aip_test_trainer.common import parser


def main() -> None:
    args = parser()
    args.add_argument("--lines", type=int, default=20)
    args.add_argument("--seconds", type=float, default=2.0)
    args.add_argument("--last-burst", dest="last_burst", type=int, default=10)
    args.add_argument("--flood", type=int, default=0)
    args.add_argument("--fail", action="store_true")
    known, _ = args.parse_known_args()
    if known.flood:
        for number in range(1, known.flood + 1):
            print(f"flood line {number:06d}")
        sys.stdout.flush()
        return
    pause = known.seconds / max(known.lines, 1)
    for number in range(1, known.lines + 1):
        print(f"chatty line {number:04d}", flush=True)
        time.sleep(pause)
    time.sleep(0.5)
    for number in range(known.lines + 1, known.lines + known.last_burst + 1):
        print(f"chatty line {number:04d}", flush=True)
    if known.fail:
        sys.exit(1)


if __name__ == "__main__":
    main()
