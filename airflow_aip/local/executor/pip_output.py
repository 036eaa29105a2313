"""An installer's output while a job's environment is built: all to the service's log, one line to the job's.

An installer prints a line per requirement (pip: ~40 "Requirement already satisfied" lines per
build on the host runtime; uv: a `` + name==version`` line per package). Relayed into the task log they came
before the first trial and said nothing a user acts on. The job's log now gets one summary
(what was installed, how much was already there, any warnings); every line stays in
``aip-local serve``'s own log (its stderr), tagged with the job, for when a build needs reading.
"""

from __future__ import annotations

import logging

log = logging.getLogger("airflow_aip.local.pip")

_INSTALLED = "Successfully installed "
_SATISFIED = "Requirement already satisfied"
_UV_ADDED = "+ "
_UV_INFO = (
    "Resolved ",
    "Prepared ",
    "Installed ",
    "Uninstalled ",
    "Audited ",
    "Using ",
    "Creating ",
    "Building ",
    "Built ",
    "Downloading ",
    "Downloaded ",
    "Activate ",
    "- ",
    "~ ",
)


class PipOutput:
    """A :data:`~.processes.LineSink` for one build: logs each line, counts what the summary says."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.installed: list[str] = []
        self.satisfied = 0
        self.warnings = 0
        self.lines = 0

    def __call__(self, stream: str, line: str) -> None:
        self.lines += 1
        log.log(logging.WARNING if stream == "stderr" else logging.INFO, "job %s pip: %s", self.job, line)
        text = line.strip()
        if text.startswith(_SATISFIED):
            self.satisfied += 1
        elif text.startswith(_INSTALLED):
            self.installed += text.removeprefix(_INSTALLED).split()
        elif text.startswith(_UV_ADDED):
            self.installed.append(text.removeprefix(_UV_ADDED))
        elif stream == "stderr" and text and not text.startswith(_UV_INFO):
            self.warnings += 1

    def summary(self) -> str:
        """One line: ``installed a-1, b-2 (40 requirements already satisfied, 1 warning line); ...``."""
        installed = ", ".join(self.installed) or "nothing new"
        notes = [f"{self.satisfied} requirement{'s' * (self.satisfied != 1)} already satisfied"]
        if self.warnings:
            notes.append(f"{self.warnings} warning line{'s' * (self.warnings != 1)}")
        where = f"its {self.lines} lines are in the service's log"
        return f"installed {installed} ({', '.join(notes)}); {where}"
