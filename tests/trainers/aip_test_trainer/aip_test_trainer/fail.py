"""Fails: prints a traceback-like message on stderr and exits with code 3 (after ``--seconds``, if given)."""

from __future__ import annotations

import sys
import time


def main() -> None:
    if "--seconds" in sys.argv:  # how long it works before failing (default: at once)
        time.sleep(float(sys.argv[sys.argv.index("--seconds") + 1]))
    print("starting, about to fail")
    print("ValueError: the training data is empty", file=sys.stderr)
    sys.exit(3)


if __name__ == "__main__":
    main()
