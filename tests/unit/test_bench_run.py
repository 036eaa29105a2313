"""bench.run --only: the sections it measured replace theirs; the others stay as they were measured."""

from __future__ import annotations

from bench.common import Figure, Series
from bench.run import merge, render

PREVIOUS = """# Benchmark results

Written by `make bench` (`python -m bench.run`).

## Machine

- date: before

## DAG-parse cost

| parse row |

- a note written by hand

## trigger at scale

| old trigger row |

## Failed measurements

- parse: it broke
- trigger: it broke too
"""


def test_a_partial_run_replaces_its_sections_and_keeps_the_others() -> None:
    fresh = render([Figure("trigger at scale", "new row", "%", Series("one triggerer", [1.0]))], [])
    merged = merge(PREVIOUS, fresh, {"trigger"})
    assert "- date: before" in merged  # the machine the other sections were measured on
    assert "| parse row |\n\n- a note written by hand" in merged
    assert "| new row | 1 / 1 / 1 % |" in merged
    assert "old trigger row" not in merged
    assert merged.endswith("## Failed measurements\n\n- parse: it broke\n")  # trigger's failure is stale
    assert merged.index("## DAG-parse cost") < merged.index("## trigger at scale")


def test_a_new_section_and_a_new_failure_come_last() -> None:
    fresh = render([Figure("make demo", "demo row", "s", Series("ours", [2.0]))], ["demo: timed out"])
    merged = merge(PREVIOUS, fresh, {"demo"})
    assert merged.index("## trigger at scale") < merged.index("## make demo") < merged.index("## Failed")
    assert merged.endswith("- parse: it broke\n- trigger: it broke too\n- demo: timed out\n")
