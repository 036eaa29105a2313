"""Sphinx configuration of the docs site: `make docs` builds it, `make lint` with warnings as errors.

Pages are Markdown (MyST); the reference pages take the operators', sensors', triggers' and hooks'
arguments from their docstrings (autodoc, which imports the modules).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The checkout's package, even where another copy is installed.
sys.path.insert(0, str(ROOT))
# Autodoc imports Airflow. Give it a home of its own (under build/, which `make clean` removes):
# the build reads no developer's ~/airflow and needs no Airflow metadata database.
os.environ.setdefault("AIRFLOW_HOME", str(ROOT / "build" / "docs" / "airflow-home"))

# Airflow logs at INFO as autodoc first imports it (reading its config): not news in a build.
logging.getLogger("airflow").setLevel(logging.WARNING)

import airflow_aip  # noqa: E402  (after AIRFLOW_HOME is set)

project = "airflow-aip"
author = "airflow-aip contributors"
copyright = "airflow-aip contributors"
release = airflow_aip.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# GitHub's anchors for `[text](page.md#a-heading)` links: GitHub renders the same files.
myst_heading_anchors = 3

# Arguments come from the docstrings (reStructuredText `:param x:` fields, or Google style).
autodoc_default_options = {"member-order": "bysource"}
autoclass_content = "both"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Every cross-reference must name something that exists (`make lint` runs with -n).
nitpicky = True

html_theme = "furo"
html_title = f"airflow-aip {release}"


def _lookup(dotted: str) -> tuple[bool, Any]:
    """The object a dotted name reaches (importing its longest module prefix), if any."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for name in parts[split:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False, None
        return True, obj
    return False, None


def _exists(target: str, module: str | None, cls: str | None) -> bool:
    """Whether a Python reference names a real object, read from where it was written."""
    target = target.lstrip("~.")
    scopes = [""]
    if module:
        scopes[:0] = [f"{module}."]
    if module and cls:
        scopes[:0] = [f"{module}.{cls}."]
        # A class documented where it is exported (airflow_aip.hooks.JobLogsHook): its docstring
        # names things as its own module sees them (airflow_aip.hooks.logs).
        found, obj = _lookup(f"{module}.{cls}")
        home = getattr(obj, "__module__", None) if found else None
        if home and home != module:
            scopes[:0] = [f"{home}.{cls}.", f"{home}."]
    return any(_lookup(scope + target)[0] for scope in scopes)


def _resolve_undocumented(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Render a reference to a real but undocumented object (a model module, a helper type) as code.

    Only the operators, sensors, triggers and hooks have pages; the rest of the package is read in
    its source. A reference to something that does not exist stays missing: a warning, so an error
    in `make lint`, which is how a renamed or removed name in a docstring is caught.
    """
    if node.get("refdomain") != "py":
        return None
    if _exists(node["reftarget"], node.get("py:module"), node.get("py:class")):
        return contnode
    return None


def setup(app: Any) -> None:
    app.connect("missing-reference", _resolve_undocumented)
