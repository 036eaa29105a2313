"""Run every ``bench/bench_*.py`` and write ``bench/RESULTS.md``.

Each figure is printed beside its baseline measured in the same run, as a ratio; a module that
cannot take its measurement makes the runner exit non-zero. With ``--only``, the sections it
measured replace theirs in the results file and the others stay as they were measured.

    python -m bench.run [--repeats N] [--only packaging,trigger]
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import re
import sys
import traceback
from datetime import datetime, timezone
from pathlib import Path

from bench.common import Figure

HERE = Path(__file__).resolve().parent


def machine_info() -> list[str]:
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return [
        f"- date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}",
        f"- python: {platform.python_version()} ({platform.machine()}, {platform.system()})",
        f"- cores: {os.cpu_count()}, memory: {mem}",
    ]


def render(figures: list[Figure], failures: list[str]) -> str:
    lines = ["# Benchmark results", "", "Written by `make bench` (`python -m bench.run`).", ""]
    lines += ["## Machine", "", *machine_info(), ""]
    topics: dict[str, list[Figure]] = {}
    for fig in figures:
        topics.setdefault(fig.topic, []).append(fig)
    for topic, figs in topics.items():
        lines += [f"## {topic}", "", "| figure | ours (min / median / max) | baseline | ratio | goal |"]
        lines += ["|---|---|---|---|---|"]
        for f in figs:
            base = f"{f.baseline.label}: {f.baseline.cell(f.unit)}" if f.baseline else "—"
            ratio = f"{f.ratio:.3g}x" if f.ratio is not None else "—"
            met = {True: " ✅", False: " ❌", None: ""}[f.goal_met]
            lines.append(f"| {f.name} | {f.ours.cell(f.unit)} | {base} | {ratio} | {f.goal}{met} |")
        notes = [n for f in figs for n in f.notes]
        if notes:
            lines += ["", *[f"- {n}" for n in notes]]
        lines.append("")
    if failures:
        lines += ["## Failed measurements", "", *[f"- {f}" for f in failures], ""]
    return "\n".join(lines)


def merge(previous: str, fresh: str, topics: set[str]) -> str:
    """``previous`` with ``fresh``'s sections in place of theirs (new ones at the end) and its
    machine and failure lines kept but for the topics re-run (``topics``, as ``--only`` names them)."""

    def sections(text: str) -> tuple[str, dict[str, str]]:
        head, *parts = re.split(r"(?m)^(?=## )", text)
        return head, {part.split("\n", 1)[0]: part.rstrip("\n") + "\n\n" for part in parts}

    head, old = sections(previous)
    _, new = sections(fresh)
    new.pop("## Machine", None)
    failed = "## Failed measurements"
    kept = [line for line in old.pop(failed, "").splitlines() if line.startswith("- ")]
    kept = [line for line in kept if line[2:].split(":", 1)[0] not in topics]
    kept += [line for line in new.pop(failed, "").splitlines() if line.startswith("- ")]
    merged = {**old, **new}
    if kept:
        merged[failed] = "\n".join([failed, "", *kept]) + "\n\n"
    return (head + "".join(merged.values())).rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated topics, e.g. packaging,trigger")
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    opts = parser.parse_args()
    wanted = {t.strip() for t in opts.only.split(",") if t.strip()}
    figures: list[Figure] = []
    failures: list[str] = []
    for path in sorted(HERE.glob("bench_*.py")):
        topic = path.stem.removeprefix("bench_")
        if wanted and topic not in wanted:
            continue
        print(f"== {topic}", flush=True)
        try:
            module = importlib.import_module(f"bench.{path.stem}")
            got = module.run(opts.repeats)
        except Exception:
            failures.append(f"{topic}: {traceback.format_exc(limit=3).strip().splitlines()[-1]}")
            traceback.print_exc()
            continue
        for fig in got:
            ratio = f" ratio {fig.ratio:.3g}" if fig.ratio else ""
            print(f"   {fig.name}: {fig.ours.cell(fig.unit)}{ratio}")
        figures.extend(got)
    text = render(figures, failures)
    if wanted and opts.output.exists():
        text = merge(opts.output.read_text(), text, wanted)
    opts.output.write_text(text)
    print(f"wrote {opts.output}")
    if not figures and not failures:
        print("no benchmark ran", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
