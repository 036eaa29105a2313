"""Waits at a gate, then runs as ``chatty`` (its numbered lines, ``--fail`` included).

For tests that need many jobs running, and watched, at the same time however long submitting
them took: each job prints ``waiting at the gate`` and waits until the file ``--gate`` exists
(the local service runs its jobs on the test's machine), then prints ``chatty line 0001`` ...
and ends. ``--gate-timeout`` seconds without the gate end the job with code 2, so a test that
died does not leave jobs waiting for ever.
"""

from __future__ import annotations

import os
import sys
import time

from aip_test_trainer import chatty
from aip_test_trainer.common import parser


def main() -> None:
    args = parser()
    args.add_argument("--gate", required=True)
    args.add_argument("--gate-timeout", dest="gate_timeout", type=float, default=600.0)
    known, _ = args.parse_known_args()
    print("waiting at the gate", flush=True)
    deadline = time.monotonic() + known.gate_timeout
    while not os.path.exists(known.gate):
        if time.monotonic() > deadline:
            print(f"the gate {known.gate} did not open within {known.gate_timeout}s", file=sys.stderr)
            sys.exit(2)
        time.sleep(0.2)
    chatty.main()  # chatty reads its own arguments and leaves --gate alone


if __name__ == "__main__":
    main()
