"""Holds ``--gib`` GiB of memory it has written to (resident, not just reserved), then succeeds.

For the machine-size tests: past its machine's memory, the kernel (or the service's watchdog) kills
it, as Vertex AI's machine would. It writes in 64 MiB steps, so the kill comes once it is over.
"""

from __future__ import annotations

import argparse
import time

STEP = 64 << 20


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--gib", type=float, required=True)
    args.add_argument("--hold", type=float, default=1.0, help="seconds to hold it before ending")
    known, _ = args.parse_known_args()
    held = []
    for _ in range(int(known.gib * (1 << 30)) // STEP):
        held.append(b"\x01" * STEP)  # written: resident at once
        time.sleep(0.005)  # lets the service's watchdog read it on the way up, where it is the guard
    print(f"holding {len(held) * STEP / (1 << 30):.2f} GiB")
    time.sleep(known.hold)


if __name__ == "__main__":
    main()
