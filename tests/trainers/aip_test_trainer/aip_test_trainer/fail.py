"""Fails: prints a traceback-like message on stderr and exits with code 3."""

from __future__ import annotations

import sys


def main() -> None:
    print("starting, about to fail")
    print("ValueError: the training data is empty", file=sys.stderr)
    sys.exit(3)


if __name__ == "__main__":
    main()
