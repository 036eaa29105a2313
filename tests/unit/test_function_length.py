"""No function in the package is longer than a screen: 80 lines, its docstring included."""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_aip

MAX_LINES = 80
PACKAGE = Path(airflow_aip.__file__).parent


def function_lengths(root: Path) -> dict[str, int]:
    """``path:line name`` -> lines (``end_lineno - lineno + 1``) of every function below ``root``."""
    lengths = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"
                lengths[where] = (node.end_lineno or node.lineno) - node.lineno + 1
    return lengths


def test_the_check_sees_the_package() -> None:
    assert len(function_lengths(PACKAGE)) > 1000


def test_no_function_is_longer_than_a_screen() -> None:
    long = {where: lines for where, lines in function_lengths(PACKAGE).items() if lines > MAX_LINES}
    assert long == {}, f"split these into steps of at most {MAX_LINES} lines: {long}"
